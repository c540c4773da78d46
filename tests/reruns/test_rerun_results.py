"""result_record: verification, rejection log, and recording once."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
from django.utils import timezone

from reruns.models import JobState, RejectedResult, ResultReceipt
from reruns.services import ResultRejected, result_record
from runs.models import Evidence, EvidenceEvent, Run
from tests.factories import RunFactory
from tests.factories_reruns import TEST_KEYS, double_result, job_for, sign


@pytest.fixture(autouse=True)
def _keys(settings):
    settings.KERNELINDEX_WORKER_KEYS = TEST_KEYS


@pytest.fixture
def run(db):
    return RunFactory()


def _snapshot(run):
    run.refresh_from_db()
    return (
        run.evidence,
        EvidenceEvent.objects.count(),
        ResultReceipt.objects.count(),
        Run.objects.count(),
    )


def test_cpu_result_checks_the_run_and_is_recorded_once(run):
    job = job_for(run)
    envelope = sign(double_result(job))
    receipt = result_record(envelope=envelope)

    job.refresh_from_db()
    run.refresh_from_db()
    assert job.state == JobState.SUCCEEDED and job.finished_at is not None
    assert receipt.device == "cpu" and receipt.status == "ok"
    # A CPU result is kept as a check, never as a GPU run, and can at most check the run.
    assert receipt.controlled_run is None
    assert run.evidence == Evidence.CHECKED
    event = receipt.evidence_event
    assert (event.from_level, event.to_level, event.cause_job) == ("reported", "checked", job.uuid)
    assert len(receipt.payload["measurement"]["samples"]) == 50

    before = _snapshot(run)
    with pytest.raises(ResultRejected) as exc:
        result_record(envelope=copy.deepcopy(envelope))
    assert exc.value.reason == "replay"
    assert _snapshot(run) == before
    assert RejectedResult.objects.get().reason == "replay"


def test_failed_correctness_marks_the_run_incorrect(run):
    job = job_for(run)
    result_record(envelope=sign(double_result(job, KI_DOUBLE_INCORRECT="1")))
    run.refresh_from_db()
    assert run.evidence == Evidence.INCORRECT


def test_runner_that_could_not_run_fails_the_job_and_leaves_the_evidence(run):
    job = job_for(run)
    receipt = result_record(envelope=sign(double_result(job, KI_DOUBLE_STATUS="unavailable")))
    job.refresh_from_db()
    run.refresh_from_db()
    assert job.state == JobState.FAILED and "unavailable" in job.error
    assert receipt.evidence_event is None
    assert run.evidence == Evidence.REPORTED


def _tampered(envelope):
    envelope["payload"]["measurement"]["median"] *= 0.5
    return envelope


def _foreign_key(envelope):
    return sign(envelope, key_id="someone-else", secret="b2" * 32)


def _wrong_nonce(envelope):
    envelope["payload"]["job"]["nonce"] = "0" * 32
    return sign(envelope)


def _unsigned(envelope):
    envelope.pop("signature")
    return envelope


@pytest.mark.parametrize(
    "spoil, reason",
    [
        (_tampered, "tampered"),
        (_foreign_key, "unknown-key"),
        (_wrong_nonce, "foreign-job"),
        (_unsigned, "malformed"),
    ],
)
def test_bad_results_change_nothing_and_are_logged(run, spoil, reason):
    job = job_for(run)
    envelope = spoil(sign(double_result(job)))
    before = _snapshot(run)
    with pytest.raises(ResultRejected) as exc:
        result_record(envelope=envelope)
    assert exc.value.reason == reason
    assert _snapshot(run) == before
    job.refresh_from_db()
    assert job.state == JobState.QUEUED
    logged = RejectedResult.objects.get()
    assert logged.reason == reason and logged.job_ref == str(job.uuid)


def test_result_of_one_job_cannot_be_recorded_for_another(run):
    job = job_for(run)
    other = job_for(RunFactory(), gpu_class="h100")
    envelope = double_result(job)
    envelope["payload"]["job"] = {"id": str(other.uuid), "nonce": other.nonce}
    with pytest.raises(ResultRejected) as exc:
        result_record(envelope=sign(envelope))
    assert exc.value.reason == "foreign-job"
    assert "run" in exc.value.detail
    assert not ResultReceipt.objects.exists()


@pytest.mark.parametrize(
    "finished, issued_shift, detail",
    [
        (timedelta(days=1), timedelta(0), "in the future"),
        (timedelta(hours=-2), timedelta(0), "before the job was issued"),
        (timedelta(0), timedelta(days=-30), "after the job was issued"),
    ],
)
def test_stale_results_are_rejected(run, finished, issued_shift, detail):
    job = job_for(run)
    job.issued_at = timezone.now() + issued_shift
    job.save(update_fields=["issued_at"])
    envelope = double_result(job)
    moment = timezone.now() + finished
    envelope["payload"]["finishedAt"] = moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with pytest.raises(ResultRejected) as exc:
        result_record(envelope=sign(envelope))
    assert exc.value.reason == "stale" and detail in exc.value.detail
    assert RejectedResult.objects.get().reason == "stale"


def test_a_result_for_an_unapproved_job_is_refused(run):
    job = job_for(run, state=JobState.AWAITING_APPROVAL)
    with pytest.raises(ResultRejected):
        result_record(envelope=sign(double_result(job)))
    assert not ResultReceipt.objects.exists()


def test_signatures_agree_with_the_runner(run):
    """The runner signs with its own stdlib JCS; the server verifies with rfc8785."""
    from kirunner.sign import parse_key as runner_parse_key
    from kirunner.sign import sign_result
    from reruns.signing import parse_key

    for secret in ["a1" * 32, "hex:" + "ff" * 16, "utf8:short but fine secret", "plain words"]:
        assert parse_key(secret) == runner_parse_key(secret)
    job = job_for(run)
    envelope = double_result(job)
    sign_result(envelope, "test-worker-1", runner_parse_key(TEST_KEYS["test-worker-1"]))
    receipt = result_record(envelope=envelope)
    assert receipt.key_id == "test-worker-1"


def test_malformed_results_are_rejected_by_the_schema_and_logged(run):
    """Each hostile shape is refused before anything reads it, with the field that is wrong,
    and logged; the job and the run stay as they were."""
    job = job_for(run)
    good = sign(double_result(job))

    def variant(change):
        doc = copy.deepcopy(good)
        change(doc)
        return doc

    def resign(change):
        def apply(doc):
            change(doc)
            doc.update(sign(doc))

        return apply

    cases = {
        "non-ASCII signature": (variant(lambda d: d["signature"].update(value="é" * 64)), "value"),
        "string median, signed": (
            variant(resign(lambda d: d["payload"]["measurement"].update(median="0.1"))),
            "median",
        ),
        "boolean median, signed": (
            variant(resign(lambda d: d["payload"]["measurement"].update(median=True))),
            "median",
        ),
        "no payload": (variant(lambda d: d.pop("payload")), "payload"),
        "ok without a measurement": (
            variant(resign(lambda d: d["payload"].pop("measurement"))),
            "measurement",
        ),
        "unknown status": (
            variant(resign(lambda d: d["payload"].update(status="great"))),
            "status",
        ),
        "not an object": (["RerunResult"], "document"),
    }
    before = _snapshot(run)
    refused = {}
    for name, (doc, field) in cases.items():
        with pytest.raises(ResultRejected) as exc:
            result_record(envelope=doc)
        refused[name] = (exc.value.reason, field in exc.value.detail)
    assert refused == {name: ("malformed", True) for name in cases}
    assert RejectedResult.objects.filter(reason="malformed").count() == len(cases)
    assert _snapshot(run) == before
    job.refresh_from_db()
    assert job.state == JobState.QUEUED

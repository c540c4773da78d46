"""A verified GPU result goes in through the door of every upstream file: the record checks,
the write and ranking, a ledger entry of the source `kernelindex`; then the one evidence
writer, once."""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

import pytest
from django.db import IntegrityError, transaction

from kirunner.canonical import canonicalize
from reruns import services
from reruns.models import JobState, RejectedResult, ResultReceipt
from reruns.services import ResultRejected, result_record
from runs import evidence
from runs.models import Evidence, EvidenceEvent, ImportRecord, Publication, Run
from tests.factories import RunFactory
from tests.factories_reruns import TEST_KEYS, double_result, job_for, sign

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _keys(settings):
    settings.KERNELINDEX_WORKER_KEYS = TEST_KEYS


@pytest.fixture
def run(db):
    return RunFactory()


def _gpu_result(job, *, used_revision: str | None = None) -> dict:
    """The CPU double's result for `job`, as the factory's H100 would report it, signed. The
    double records no device time, so the verdict is `checked` (runs.evidence, rule 5)."""
    envelope = double_result(job)
    payload = envelope["payload"]
    payload["device"] = "cuda"
    payload["environment"]["gpuName"] = "NVIDIA H100 80GB HBM3"
    if used_revision is not None:
        payload.setdefault("implementation", {})["usedRevision"] = used_revision
    return sign(envelope)


def test_a_gpu_result_is_a_ledger_entry_of_the_kernelindex_source_and_ranked(run, client):
    job = job_for(run)
    envelope = _gpu_result(job)
    receipt = result_record(envelope=envelope)

    controlled = receipt.controlled_run
    entry = ImportRecord.objects.get(source__slug="kernelindex")
    assert entry.location == f"rerun/{job.uuid}" and entry.trigger == "rerun"
    assert (entry.outcome, entry.rows, entry.created) == (ImportRecord.Outcome.CREATED, 1, 1)
    # The fetched bytes are the signed payload's: the entry's hash is the receipt's digest.
    assert entry.sha256 == hashlib.sha256(canonicalize(envelope["payload"])).hexdigest()
    assert receipt.payload_digest == f"sha256:{entry.sha256}"
    assert entry.publication == controlled.publication
    assert controlled.publication.slug == f"h100-{controlled.observed_at:%Y-%m-%d}"
    assert (controlled.rank, controlled.group.size) == (1, 1)
    assert controlled.evidence == Evidence.CONTROLLED
    page = client.get("/sources/kernelindex/ledger/")
    assert page.status_code == 200 and str(job.uuid) in page.content.decode()


def test_a_cpu_result_makes_no_run_and_no_ledger_entry(run):
    result_record(envelope=sign(double_result(job_for(run))))
    assert not ImportRecord.objects.filter(source__slug="kernelindex").exists()
    assert not Run.objects.filter(source__slug="kernelindex").exists()


def test_a_record_the_checks_refuse_is_rejected_and_writes_nothing(run):
    """The result schema lets a revision name of 200 characters through; the record checks
    every upstream row passes hold it to its column (80), before the first write."""
    job = job_for(run)
    runs_before = Run.objects.count()
    with pytest.raises(ResultRejected) as exc:
        result_record(envelope=_gpu_result(job, used_revision="r" * 100))
    assert exc.value.reason == "malformed"
    assert "revision is longer than 80 characters" in exc.value.detail
    assert RejectedResult.objects.get().detail == exc.value.detail
    assert Run.objects.count() == runs_before
    assert not Publication.objects.filter(source__slug="kernelindex").exists()
    assert not ImportRecord.objects.exists()
    assert not EvidenceEvent.objects.exists() and not ResultReceipt.objects.exists()
    job.refresh_from_db()
    run.refresh_from_db()
    assert job.state == JobState.QUEUED and run.evidence == Evidence.REPORTED


def test_the_evidence_writer_runs_once_per_result(run, monkeypatch):
    calls = {"apply": 0, "controlled level": 0}

    def counted(name, function):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(services, "evidence_apply", counted("apply", evidence.evidence_apply))
    monkeypatch.setattr(
        evidence, "_controlled_level", counted("controlled level", evidence._controlled_level)
    )
    receipt = result_record(envelope=_gpu_result(job_for(run)))

    assert calls == {"apply": 1, "controlled level": 1}
    event = EvidenceEvent.objects.get()
    assert receipt.evidence_event == event and event.controlled_run == receipt.controlled_run
    run.refresh_from_db()
    assert (event.run, run.evidence, event.to_level) == (run, Evidence.CHECKED, Evidence.CHECKED)


def test_the_pipeline_knows_nothing_of_evidence_or_controlled_runs():
    """No side branch: the pipeline writes every record alike, and only runs.evidence
    writes a level past `reported`."""
    tree = ast.parse((REPO / "runs" / "sources" / "pipeline.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "runs.evidence" not in imported
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            assert "controlled" not in [a.arg for a in node.args.kwonlyargs], node.name


def test_only_a_run_of_the_kernelindex_source_can_be_made_controlled(run):
    """The level `controlled` goes to the run a verified result became, never to another."""
    other = RunFactory()
    with pytest.raises(ValueError, match="no controlled run"):
        evidence.evidence_apply(
            run=run, controlled_run=other, outcome=evidence.Outcome("checked"), cause="c"
        )
    other.refresh_from_db()
    assert other.evidence == Evidence.REPORTED and not EvidenceEvent.objects.exists()


def test_a_result_that_fails_mid_write_leaves_nothing_and_the_next_one_records(db, monkeypatch):
    """The controlled run's record and the evidence event have no savepoints of their own: the
    recorder's, one a result, rolls a failed result back whole, and the folder's transaction
    goes on (manage.py rerun load-demo records a folder so)."""
    first, second = RunFactory(), RunFactory()
    recorder = services.ResultRecorder(via="demo", rank_later=True)
    create = EvidenceEvent.objects.create
    calls = []

    def create_once_failing(**fields):
        calls.append(fields["run"].pk)
        if len(calls) == 1:  # the first result's event: after its controlled run was written
            raise IntegrityError("an evidence event that cannot be written")
        return create(**fields)

    monkeypatch.setattr(EvidenceEvent.objects, "create", create_once_failing)
    with transaction.atomic():
        with pytest.raises(ResultRejected):
            recorder.record(_gpu_result(job_for(first)))
        receipt = recorder.record(_gpu_result(job_for(second)))
        recorder.rank()

    assert calls == [first.pk, second.pk]
    # Of the first result: no controlled run, no ledger entry, no receipt, its level untouched.
    assert list(Run.objects.filter(source__slug="kernelindex")) == [receipt.controlled_run]
    assert ImportRecord.objects.filter(source__slug="kernelindex").count() == 1
    assert list(ResultReceipt.objects.values_list("job__run", flat=True)) == [second.pk]
    first.refresh_from_db()
    assert first.evidence == Evidence.REPORTED
    assert list(EvidenceEvent.objects.values_list("run", flat=True)) == [second.pk]

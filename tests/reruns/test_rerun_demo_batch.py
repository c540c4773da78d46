"""`rerun load-demo` records a folder in one transaction through one ResultRecorder: the same
rows, events, levels and ledger entries as recording its results one at a time with
result_record, and the same stop at the first rejected result, with its file name."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from kirunner.sign import parse_key
from reruns.models import JobState, RejectedResult, RerunJob, ResultReceipt
from reruns.services import result_record
from runs.claims.models import JudgedClaim
from runs.models import EvidenceEvent, ImportRecord, Run
from runs.sources.pipeline import ingest
from tests.factories_reruns import DOUBLE_COMMAND, sign

DATA = Path(__file__).resolve().parents[2] / "data"
FIXTURE = Path(__file__).resolve().parents[1] / "data" / "reruns" / "h200-2026-11-29"
# The fixture's H200 result of an upstream H200 rope row (liger-kernel-ci 02bac05).
ROPE_JOB = "99d7391b-7193-405c-a60d-54a2804a6df8"
# Jobs sort by id and load in that order: after the fixture's, another runner process's result
# for the same run (judged once the first one's event is written), a CPU check, and a runner
# that could not run.
SECOND = "a0000000-0000-4000-8000-000000000001"
CPU = "b0000000-0000-4000-8000-000000000002"
UNAVAILABLE = "c0000000-0000-4000-8000-000000000003"


@pytest.fixture
def rope_ci(db):
    ingest(source_slug="liger-kernel-ci", locations=[str(DATA / "liger-ci" / "02bac05")])


def _key() -> dict:
    return json.loads((FIXTURE / "worker-key.json").read_text())


def _job_doc(job_id: str, *, issued: str | None = None) -> dict:
    doc = json.loads((FIXTURE / f"JOB-{ROPE_JOB}.json").read_text())
    if job_id != ROPE_JOB:
        doc["job"] = {**doc["job"], "id": job_id, "nonce": job_id.replace("-", "")}
        doc["job"]["issuedAt"] = issued or doc["job"]["issuedAt"]
    return doc


def _double(folder: Path, job_id: str, **env: str) -> None:
    """A result of the CPU test double, signed with the folder's key."""
    issued = (timezone.now() - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    job_path = folder / f"JOB-{job_id}.json"
    job_path.write_text(json.dumps(_job_doc(job_id, issued=issued)))
    out = folder.parent / f"unsigned-{job_id}.json"
    subprocess.run(
        [*DOUBLE_COMMAND, str(job_path), "--out", str(out)],
        # A runner that could not run exits non-zero after writing its result.
        check=False,
        env={**os.environ, **env},
        timeout=60,
    )
    result = sign(json.loads(out.read_text()), _key()["keyId"], _key()["secret"])
    (folder / f"RESULT-{job_id}.json").write_text(json.dumps(result))


def _second_process(*, tamper: bool = False) -> dict:
    """The fixture's rope result as another job's: another runner process of the same run
    (a job without a process id counts as its own), signed again with the folder's key."""
    result = json.loads((FIXTURE / f"RESULT-{ROPE_JOB}.json").read_text())
    payload = copy.deepcopy(result["payload"])
    payload["job"] = {"id": SECOND, "nonce": SECOND.replace("-", "")}
    result = sign({**result, "payload": payload}, _key()["keyId"], _key()["secret"])
    if tamper:
        result["payload"]["measurement"]["median"] *= 0.5
    return result


def _folder(tmp_path: Path, *, tamper: bool = False) -> Path:
    folder = tmp_path / "batch"
    folder.mkdir()
    shutil.copy(FIXTURE / "worker-key.json", folder)
    for name in (f"JOB-{ROPE_JOB}.json", f"RESULT-{ROPE_JOB}.json"):
        shutil.copy(FIXTURE / name, folder)
    (folder / f"JOB-{SECOND}.json").write_text(json.dumps(_job_doc(SECOND)))
    (folder / f"RESULT-{SECOND}.json").write_text(json.dumps(_second_process(tamper=tamper)))
    _double(folder, CPU)
    _double(folder, UNAVAILABLE, KI_DOUBLE_STATUS="unavailable")
    return folder


def _load(folder: Path) -> str:
    out = StringIO()
    call_command("rerun", "load-demo", str(folder), stdout=out, stderr=StringIO())
    return out.getvalue()


def _one_at_a_time(folder: Path) -> None:
    """What load-demo did before it recorded a folder at once: each job row as its file says,
    then its result through result_record, in job order."""
    keys = {_key()["keyId"]: parse_key(_key()["secret"])}
    for path in sorted(folder.glob("JOB-*.json")):
        doc = json.loads(path.read_text())
        RerunJob.objects.create(
            uuid=doc["job"]["id"],
            nonce=doc["job"]["nonce"],
            run=Run.objects.public().get(
                source__slug=doc["run"]["source"], external_id=doc["run"]["externalId"]
            ),
            gpu_class=doc["job"]["gpuClass"],
            state=JobState.QUEUED,
            offline=True,
            issued_at=parse_datetime(doc["job"]["issuedAt"]),
        )
        envelope = json.loads((folder / path.name.replace("JOB-", "RESULT-")).read_text())
        result_record(envelope=envelope, via="demo", keys=keys)


def _recorded() -> dict:
    """Everything recording results writes, by natural keys (no row ids, no write times but
    the runner's own)."""
    jobs = {}
    for job in RerunJob.objects.select_related("run"):
        # A failed job's end is the moment it was recorded; a succeeded offline job's, its
        # runner's.
        finished = job.finished_at if job.state == JobState.SUCCEEDED else bool(job.finished_at)
        jobs[str(job.uuid)] = (
            job.nonce, job.run.public_id, job.gpu_class, job.state, job.error, job.offline,
            job.issued_at, job.started_at, finished,
        )  # fmt: skip
    return {
        "jobs": jobs,
        "receipts": list(
            ResultReceipt.objects.order_by("job__uuid").values(
                "job__uuid",
                "key_id",
                "signature",
                "payload_digest",
                "payload",
                "status",
                "device",
                "via",
                "controlled_run__public_id",
                "evidence_event__cause",
            )  # fmt: skip
        ),
        "events": list(
            EvidenceEvent.objects.order_by("pk").values(
                "run__public_id",
                "from_level",
                "to_level",
                "outcome",
                "cause",
                "cause_job",
                "controlled_run__public_id",
                "facts",
            )  # fmt: skip
        ),
        "levels": sorted(
            Run.objects.filter(evidence_events__isnull=False)
            .distinct()
            .values_list("public_id", "evidence")
        ),
        "controlled": list(
            Run.objects.filter(source__slug="kernelindex")
            .order_by("external_id")
            .values(
                "public_id",
                "external_id",
                "revision",
                "is_current",
                "digest",
                "evidence",
                "rank",
                "median",
                "labels",
                "publication__slug",
                "group__key",
                "group__size",
                "environment__digest",
                "workload__digest",
                "protocol__digest",
                "implementation__digest",
            )  # fmt: skip
        ),
        "ledger": list(
            ImportRecord.objects.filter(source__slug="kernelindex")
            .order_by("pk")
            .values(
                "publication__slug",
                "location",
                "sha256",
                "rows",
                "created",
                "revised",
                "unchanged",
                "outcome",
                "trigger",
                "error",
            )  # fmt: skip
        ),
        "claims": sorted(
            JudgedClaim.objects.values_list(
                "better__public_id", "other__public_id", "verdict", "severity"
            )
        ),
        "rejected": list(
            RejectedResult.objects.order_by("pk").values(
                "reason", "detail", "job_ref", "key_id", "payload_digest", "via"
            )
        ),
    }


def test_a_folder_records_what_its_results_recorded_one_at_a_time_record(
    rope_ci, tmp_path, django_capture_on_commit_callbacks
):
    folder = _folder(tmp_path)
    with transaction.atomic():
        # What runs once the load commits (claims, watch notices) runs here, then is undone.
        with django_capture_on_commit_callbacks(execute=True):
            out = _load(folder)
        at_once = _recorded()
        transaction.set_rollback(True)
    assert "4 result(s) recorded, 0 already present" in out
    assert not RerunJob.objects.exists()

    with django_capture_on_commit_callbacks(execute=True):
        _one_at_a_time(folder)
    one_by_one = _recorded()

    assert at_once == one_by_one
    # What the comparison covers: two GPU results of one run (two controlled runs in one
    # publication, ranked together), a CPU check, and a job the runner could not run.
    assert [r["device"] for r in at_once["receipts"]] == ["cuda", "cuda", "cpu", "cpu"]
    assert len(at_once["controlled"]) == len(at_once["ledger"]) == 2
    assert [r["group__size"] for r in at_once["controlled"]] == [2, 2]
    assert len(at_once["events"]) == 3
    assert at_once["jobs"][UNAVAILABLE][3] == JobState.FAILED


def test_the_first_rejected_result_ends_the_load_and_what_came_before_it_stays(rope_ci, tmp_path):
    folder = _folder(tmp_path, tamper=True)
    with pytest.raises(CommandError, match=rf"RESULT-{SECOND}\.json: rejected \(tampered\)"):
        _load(folder)
    # The result before it is recorded: the rejection did not undo the folder's transaction.
    assert RerunJob.objects.get(uuid=ROPE_JOB).state == JobState.SUCCEEDED
    assert ResultReceipt.objects.filter(job__uuid=ROPE_JOB).exists()
    rejected = RejectedResult.objects.get()
    assert (rejected.reason, rejected.job_ref, rejected.via) == ("tampered", SECOND, "demo")
    # Nothing after it was tried: its job waits, the jobs after it are not created yet.
    assert RerunJob.objects.get(uuid=SECOND).state == JobState.QUEUED
    assert not RerunJob.objects.filter(uuid__in=[CPU, UNAVAILABLE]).exists()

    # With the file put right, a second load goes on from there.
    (folder / f"RESULT-{SECOND}.json").write_text(json.dumps(_second_process()))
    assert "3 result(s) recorded, 1 already present" in _load(folder)
    assert ResultReceipt.objects.count() == 4

"""manage.py rerun: order, export, import, load-demo."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from django.core.management import CommandError, call_command

from reruns.models import JobState, RejectedResult, RerunJob, ResultReceipt
from runs.models import Evidence
from tests.conftest import EXAMPLE_EXTERNAL_ID
from tests.factories_reruns import (
    DOUBLE_COMMAND,
    TEST_KEYS,
    double_result,
    job_for,
    sign,
)


@pytest.fixture(autouse=True)
def _keys(settings):
    settings.KERNELINDEX_WORKER_KEYS = TEST_KEYS
    settings.CELERY_BROKER_URL = None


def _call(*args) -> str:
    from io import StringIO

    out = StringIO()
    call_command("rerun", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_order_and_export_the_example_run(example_run, tmp_path):
    job_uuid = _call("order", example_run.public_id, "--gpu-class", "h200").strip()
    job = RerunJob.objects.get(uuid=job_uuid)
    assert (job.state, job.offline, job.gpu_class) == (JobState.QUEUED, True, "h200")
    out = tmp_path / "JOB.json"
    _call("export", job_uuid, "--out", str(out))
    doc = json.loads(out.read_text())
    assert doc["apiVersion"] == "kernelindex.dev/v1alpha1" and doc["kind"] == "RerunJob"
    assert doc["job"] == {
        "id": job_uuid,
        "nonce": job.nonce,
        "issuedAt": doc["job"]["issuedAt"],
        "gpuClass": "h200",
    }
    assert doc["job"]["issuedAt"].endswith("Z")
    assert doc["run"] == {
        "publicId": example_run.public_id,
        "source": "liger-kernel-bench",
        "externalId": EXAMPLE_EXTERNAL_ID,
        "digest": example_run.digest,
    }
    assert (doc["benchmark"], doc["pass"], doc["metric"], doc["provider"]) == (
        "llama4_rope",
        "forward",
        "latency",
        "huggingface",
    )
    assert doc["workload"]["parameters"] == {
        "seq": 4096,
        "hidden": 8192,
        "q_heads": 32,
        "kv_heads": 8,
        "dtype": "bf16",
    }
    assert doc["implementation"] == {"project": "transformers", "revision": None}
    assert doc["protocol"]["family"] == "liger_kernel_bench"
    assert doc["protocol"]["quantiles"] == [0.5, 0.2, 0.8]
    assert doc["protocol"]["ligerVersion"] == "0.6.1"
    assert doc["protocol"]["upstreamCommit"] is None  # a benchmark CSV row: no script commit
    # Offline jobs are never sent to a broker; stdout export works too.
    assert json.loads(_call("export", job_uuid)) == doc


def test_the_runner_accepts_the_exported_job(example_run):
    """The job file validates against the runner's own checks (no torch needed for that)."""
    # kirunner.runner lands on main with the runner; until this branch has it, this skips.
    validate_job = pytest.importorskip("kirunner.runner").validate_job

    job = job_for(example_run, gpu_class="h200")
    from reruns.controlled import job_document

    checked = validate_job(json.loads(json.dumps(job_document(job))))
    assert checked["job_id"] == str(job.uuid) and checked["metric"] == "latency"


def test_a_ci_rows_job_names_the_commit_its_script_ran_at_for_every_provider(example_run):
    """A CI row's torch or huggingface provider names no Liger revision; the commit reaches the
    runner anyway, so a family whose script changed (DyT at ab7fe2a) measures as it did."""
    validate_job = pytest.importorskip("kirunner.runner").validate_job
    from reruns.controlled import job_document

    example_run.labels = {**example_run.labels, "upstream_commit": "ab7fe2a"}
    example_run.save(update_fields=["labels"])
    doc = job_document(job_for(example_run, gpu_class="h100"))
    assert doc["implementation"]["revision"] is None
    assert doc["protocol"]["upstreamCommit"] == "ab7fe2a"
    assert validate_job(json.loads(json.dumps(doc)))["commit"] == "ab7fe2a"


def test_export_refuses_what_it_cannot_export(example_run, bob):
    with pytest.raises(CommandError, match="not a job uuid"):
        _call("export", "nope")
    with pytest.raises(CommandError, match="no rerun job"):
        _call("export", "00000000-0000-4000-8000-000000000000")
    waiting = job_for(example_run, state=JobState.AWAITING_APPROVAL)
    with pytest.raises(CommandError, match="only approved jobs export"):
        _call("export", str(waiting.uuid))


def test_import_records_a_signed_result_and_refuses_a_bad_one(example_run, tmp_path):
    job = job_for(example_run)
    good = tmp_path / "RESULT.json"
    good.write_text(json.dumps(sign(double_result(job))))
    line = _call("import", str(good))
    assert f"job {job.uuid}: succeeded, result ok on cpu" in line
    assert f"run {example_run.public_id} reported -> checked" in line
    # The same file again is a replay: non-zero exit, logged, nothing changes.
    with pytest.raises(CommandError, match=r"rejected \(replay\)"):
        _call("import", str(good))
    assert ResultReceipt.objects.count() == 1

    other = job_for(example_run, gpu_class="h200")
    bad = tmp_path / "BAD.json"
    envelope = sign(double_result(other))
    envelope["payload"]["device"] = "cuda"  # a claim the signature does not cover
    bad.write_text(json.dumps(envelope))
    with pytest.raises(CommandError, match=r"rejected \(tampered\)"):
        _call("import", str(bad))
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(CommandError, match="not a JSON file"):
        _call("import", str(tmp_path / "junk.json"))
    with pytest.raises(CommandError, match="no such file"):
        _call("import", str(tmp_path / "missing.json"))
    assert set(RejectedResult.objects.values_list("reason", flat=True)) == {"replay", "tampered"}


def test_import_exits_non_zero_from_the_shell(tmp_path):
    """The real command line: a bad result file is a clear error and exit status 1."""
    import sys

    (tmp_path / "junk.json").write_text("[]")
    proc = subprocess.run(
        [sys.executable, "manage.py", "rerun", "import", str(tmp_path / "junk.json")],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"},
        timeout=120,
    )
    assert proc.returncode == 1
    assert "expected a JSON object" in proc.stderr


def test_load_demo_with_a_cpu_result_made_by_the_test_double(example_run, tmp_path):
    """A demo folder as the real H200 batch will be laid out, with a CPU result instead."""
    folder = tmp_path / "batch"
    folder.mkdir()
    job_uuid = _call("order", example_run.public_id).strip()
    _call("export", job_uuid, "--out", str(folder / f"JOB-{job_uuid}.json"))
    subprocess.run(
        [*DOUBLE_COMMAND, str(folder / f"JOB-{job_uuid}.json"), "--out", str(tmp_path / "r.json")],
        check=True,
    )
    result = sign(json.loads((tmp_path / "r.json").read_text()), "demo-key", "c3" * 32)
    (folder / f"RESULT-{job_uuid}.json").write_text(json.dumps(result))
    (folder / "worker-key.json").write_text(json.dumps({"keyId": "demo-key", "secret": "c3" * 32}))
    # A fresh database: the job comes from its file, linked to the run by source and id.
    RerunJob.objects.all().delete()

    out = _call("load-demo", str(folder))
    assert "1 result(s) recorded, 0 already present" in out
    job = RerunJob.objects.get(uuid=job_uuid)
    assert job.state == JobState.SUCCEEDED and job.run == example_run
    example_run.refresh_from_db()
    assert example_run.evidence == Evidence.CHECKED
    # Idempotent.
    out = _call("load-demo", str(folder))
    assert "0 result(s) recorded, 1 already present" in out
    assert ResultReceipt.objects.count() == 1

    # The demo key verifies only demo loads; the configured keys do not include it.
    shutil.copy(folder / f"RESULT-{job_uuid}.json", tmp_path / "again.json")
    with pytest.raises(CommandError, match="unknown-key"):
        _call("import", str(tmp_path / "again.json"))


def test_load_demo_needs_its_key(tmp_path):
    with pytest.raises(CommandError, match="worker-key.json: missing"):
        _call("load-demo", str(tmp_path))

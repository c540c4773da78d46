"""Correctly signed results whose figures are impossible are refused, logged, and change
nothing, on both paths that record a result: `manage.py rerun import` and the worker task.

The results start from a real H200 measurement of the example run's cell, with its host and
device-time diagnostics (data/reruns/h200-2026-11-30), re-issued for a fresh job and signed
with the test key: the signature is valid, only the figures are wrong.
"""

from __future__ import annotations

import copy
import json
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from reruns import tasks
from reruns.controlled import ran_parameters
from reruns.models import JobState, RejectedResult, ResultReceipt
from runs.models import EvidenceEvent, Run
from runs.reference import catalogue, plausibility
from tests.factories_reruns import TEST_KEYS, job_for, sign

REAL = Path(__file__).resolve().parents[2] / "data" / "reruns" / "h200-2026-11-30" / "results"
RESULT = REAL / "003-llama4_rope-forward-latency-huggingface.json"  # run 8827e3bb's cell, H200


@pytest.fixture(autouse=True)
def _keys(settings):
    settings.KERNELINDEX_WORKER_KEYS = TEST_KEYS
    settings.CELERY_BROKER_URL = None


def _real_for(job) -> dict:
    """The real result, re-issued for `job` (unsigned)."""
    envelope = json.loads(RESULT.read_text())
    envelope.pop("signature")
    payload = envelope["payload"]
    payload["job"] = {"id": str(job.uuid), "nonce": job.nonce}
    now = timezone.now()
    payload["startedAt"] = (now - timezone.timedelta(seconds=30)).isoformat()
    payload["finishedAt"] = now.isoformat()
    return envelope


def _quantiles(value):
    def spoil(m):
        m.update(median=value, p20=value, p80=value)

    return spoil


def _below_floor(m, floor_ns: float):
    # Every figure consistent with every other, but a tenth of what the bytes need.
    ms = floor_ns / 10 / 1e6
    m.update(median=ms, p20=ms, p80=ms, values=[ms, ms, ms], samples=[ms] * 5)


INSANE = {
    "median -1": (_quantiles(-1), "measurement.median is -1"),
    "median 0": (_quantiles(0), "measurement.median is 0"),
    "median -5": (_quantiles(-5.0), "measurement.median is -5.0"),
    "median 1e308": (_quantiles(1e308), "longer than the job that timed it"),
    "p20 > median > p80": (
        lambda m: m.update(p20=0.5, median=0.4, p80=0.3, samples=[0.3, 0.4, 0.5]),
        "are not in order",
    ),
    "a negative sample": (lambda m: m["samples"].__setitem__(3, -0.2), "samples[3] is -0.2"),
    "a negative device time": (
        lambda m: m["diagnostics"]["device"].update(median=-0.3),
        "diagnostics.device.median is -0.3",
    ),
    "host time out of order": (
        lambda m: m["diagnostics"]["hostEnqueue"].update(p20=9.0),
        "diagnostics.hostEnqueue: p20 9.0",
    ),
}


def _snapshot(run):
    run.refresh_from_db()
    return (run.evidence, Run.objects.count(), EvidenceEvent.objects.count(),
            ResultReceipt.objects.count())  # fmt: skip


def _import(tmp_path, envelope) -> str:
    path = tmp_path / "RESULT.json"
    path.write_text(json.dumps(envelope))
    with pytest.raises(CommandError) as exc:
        call_command("rerun", "import", str(path), stdout=StringIO(), stderr=StringIO())
    return str(exc.value)


def test_the_real_result_itself_is_recorded(example_run, tmp_path):
    """The control: unspoilt, the same re-issued result records a controlled run."""
    job = job_for(example_run, gpu_class="h200")
    path = tmp_path / "RESULT.json"
    path.write_text(json.dumps(sign(_real_for(job))))
    call_command("rerun", "import", str(path), stdout=StringIO(), stderr=StringIO())
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED and job.receipt.controlled_run.median > 0


@pytest.mark.parametrize("case", list(INSANE))
def test_rerun_import_refuses_signed_but_insane_figures(example_run, tmp_path, case):
    spoil, reason = INSANE[case]
    job = job_for(example_run, gpu_class="h200")
    envelope = _real_for(job)
    spoil(envelope["payload"]["measurement"])
    before = _snapshot(example_run)
    message = _import(tmp_path, sign(envelope))
    assert "rejected (implausible)" in message and reason in message
    assert _snapshot(example_run) == before
    job.refresh_from_db()
    assert job.state == JobState.QUEUED
    logged = RejectedResult.objects.get()
    assert logged.reason == "implausible" and logged.job == job and reason in logged.detail


def test_a_median_below_the_plausibility_floor_is_refused(example_run, tmp_path):
    job = job_for(example_run, gpu_class="h200")
    envelope = _real_for(job)
    h200 = catalogue.GPUS["NVIDIA H200"]
    floor = plausibility.floor_ns(
        "llama4_rope", "forward", "latency", ran_parameters(example_run, envelope["payload"]),
        h200.peak_bandwidth_gbs,
    )  # fmt: skip
    assert floor and floor > 1000
    _below_floor(envelope["payload"]["measurement"], floor)
    before = _snapshot(example_run)
    message = _import(tmp_path, sign(envelope))
    assert "rejected (implausible)" in message and "below the physical floor" in message
    assert _snapshot(example_run) == before


RUNNER = """
import json, sys
job = json.load(open(sys.argv[1]))
out = sys.argv[sys.argv.index("--out") + 1]
envelope = json.loads({real!r})
envelope["payload"]["job"] = job["job"]
envelope["payload"]["measurement"].update(median=-5, p20=-5, p80=-5)
json.dump(envelope, open(out, "w"))
"""


def test_the_worker_path_refuses_a_negative_median(example_run, settings, tmp_path, monkeypatch):
    """A runner that reports a median of -5 ms: the worker signs it with its own key, and the
    recording refuses it; the job fails with the reason."""
    key_id, secret = next(iter(TEST_KEYS.items()))
    monkeypatch.setenv("KERNELINDEX_WORKER_KEY_ID", key_id)
    monkeypatch.setenv("KERNELINDEX_WORKER_KEY", secret)
    job = job_for(example_run, gpu_class="h200")
    real = _real_for(job)
    script = tmp_path / "runner.py"
    script.write_text(RUNNER.format(real=json.dumps(real)))
    settings.KERNELINDEX_RUNNER_COMMAND = [sys.executable, str(script)]
    before = _snapshot(example_run)
    outcome = tasks.rerun_execute.run(job.pk)
    assert outcome.startswith("rejected: implausible: ") and "median is -5" in outcome
    assert _snapshot(example_run) == before
    job.refresh_from_db()
    assert job.state == JobState.FAILED and "median is -5" in job.error
    assert RejectedResult.objects.get().reason == "implausible"


def test_each_case_changes_the_real_result():
    """No case is a no-op on the real measurement (else its test would pass by accident)."""
    real = json.loads(RESULT.read_text())["payload"]["measurement"]
    for spoil, _ in INSANE.values():
        spoilt = copy.deepcopy(real)
        spoil(spoilt)
        assert spoilt != real


@pytest.mark.parametrize(
    "text, match",
    [
        ("[" * 100_000 + "]" * 100_000, "nested deeper than 32 levels"),
        ('{"payload": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than 32 levels"),
        ('{"payload": {"measurement": {"median": NaN}}}', "NaN is not a number"),
        ('{"payload": {"gpu": "a\\u0000"}}', "a NUL character is not allowed"),
    ],
    ids=["100k arrays", "100k arrays inside", "NaN", "NUL"],
)
def test_rerun_import_refuses_hostile_json(db, tmp_path, text, match):
    path = tmp_path / "RESULT.json"
    path.write_text(text)
    with pytest.raises(CommandError, match=f"not a JSON file .*{match}"):
        call_command("rerun", "import", str(path), stdout=StringIO(), stderr=StringIO())
    assert not ResultReceipt.objects.exists()

"""reruns.tasks called directly (no broker): claim, run the runner, sign, record; twice."""

from __future__ import annotations

import pytest
from celery.exceptions import Retry

from reruns.models import JobState, ResultReceipt
from reruns.tasks import rerun_execute, rerun_sweep
from runs.models import Evidence, EvidenceEvent
from tests.factories import RunFactory
from tests.factories_reruns import DOUBLE_COMMAND, KEY_ID, KEY_SECRET, TEST_KEYS, job_for


@pytest.fixture(autouse=True)
def _worker(settings, monkeypatch):
    settings.KERNELINDEX_WORKER_KEYS = TEST_KEYS
    settings.KERNELINDEX_RUNNER_COMMAND = DOUBLE_COMMAND
    settings.CELERY_BROKER_URL = None
    monkeypatch.setenv("KERNELINDEX_WORKER_KEY_ID", KEY_ID)
    monkeypatch.setenv("KERNELINDEX_WORKER_KEY", KEY_SECRET)


@pytest.fixture
def job(db):
    return job_for(RunFactory())


def test_called_twice_records_once(job):
    assert rerun_execute(job.pk) == "recorded: ok"
    assert rerun_execute(job.pk) == "not claimed"
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED and job.attempts == 1
    assert ResultReceipt.objects.filter(job=job).count() == 1
    assert EvidenceEvent.objects.count() == 1
    job.run.refresh_from_db()
    assert job.run.evidence == Evidence.CHECKED


def test_runner_crash_retries_with_backoff_then_fails(job, monkeypatch, settings):
    settings.RERUN_RETRY_BACKOFF = 7
    monkeypatch.setenv("KI_DOUBLE_FAIL", "1")
    job.max_attempts = 2
    job.save()
    with pytest.raises(Retry) as retry:
        rerun_execute.apply(args=[job.pk], throw=True)
    assert retry.value.when == 7  # backoff after the first attempt
    job.refresh_from_db()
    assert job.state == JobState.QUEUED and "without a result" in job.error
    result = rerun_execute(job.pk)  # the retry: second and last attempt
    assert result.startswith("failed:")
    job.refresh_from_db()
    assert job.state == JobState.FAILED and job.attempts == 2
    assert not ResultReceipt.objects.exists()


def test_a_worker_without_a_key_fails_the_job(job, monkeypatch):
    monkeypatch.delenv("KERNELINDEX_WORKER_KEY")
    assert rerun_execute(job.pk).startswith("failed:")
    job.refresh_from_db()
    assert job.state == JobState.FAILED and "KERNELINDEX_WORKER_KEY" in job.error


def test_sweep_task_runs_the_sweeper(job):
    job.attempts = job.max_attempts
    job.save()
    assert rerun_sweep()["failed"] == 1


def test_a_recording_that_crashes_fails_the_job_with_the_reason(job, monkeypatch):
    from reruns import services

    def crash(**_):
        raise RuntimeError("database said no")

    monkeypatch.setattr(services, "result_record", crash)
    assert rerun_execute(job.pk).startswith("failed: recording the result failed")
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    assert job.error == "recording the result failed: RuntimeError: database said no"

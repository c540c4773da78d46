"""rerun_request / approve / cancel / claim / sweep, without a broker (the laptop default)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from reruns.models import JobState, RerunJob
from reruns.services import (
    NO_BROKER,
    RerunError,
    rerun_approve,
    rerun_attempt_failed,
    rerun_cancel,
    rerun_claim,
    rerun_request,
    rerun_sweep,
)
from tests.factories import RunFactory
from tests.factories_reruns import job_for


@pytest.fixture(autouse=True)
def _no_broker(settings):
    settings.CELERY_BROKER_URL = None


@pytest.fixture
def run(db):
    return RunFactory()


@pytest.fixture
def staff(alice):
    alice.is_staff = True
    alice.save()
    return alice


def test_staff_order_is_queued_at_once_and_waits_without_a_broker(
    run, staff, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        job = rerun_request(run=run, requested_by=staff)
    # The dispatch is deferred to the commit (beside the page-cache fingerprint bump).
    assert [cb for cb in callbacks if "rerun" in getattr(cb, "__qualname__", "")]
    job.refresh_from_db()
    assert job.state == JobState.QUEUED
    assert job.gpu_class == "h100"  # the run's own GPU class by default
    assert job.approved_by == staff and job.issued_at is not None
    # No broker configured: nothing is sent, and the job says why.
    assert job.dispatched_at is None
    assert job.dispatch_error == NO_BROKER


def test_user_request_waits_for_approval(run, bob, staff):
    job = rerun_request(run=run, requested_by=bob, gpu_class="h200")
    assert job.state == JobState.AWAITING_APPROVAL and job.issued_at is None
    rerun_approve(job=job, approved_by=staff)
    job.refresh_from_db()
    assert job.state == JobState.QUEUED and job.approved_by == staff and job.issued_at
    # Approving twice changes nothing.
    issued = job.issued_at
    rerun_approve(job=job, approved_by=staff)
    job.refresh_from_db()
    assert job.issued_at == issued


def test_requests_that_cannot_be_honoured(run, bob):
    from django.contrib.auth.models import AnonymousUser

    with pytest.raises(RerunError, match="Log in"):
        rerun_request(run=run, requested_by=AnonymousUser())
    with pytest.raises(RerunError, match="Unknown GPU class"):
        rerun_request(run=run, requested_by=bob, gpu_class="tpu")
    rerun_request(run=run, requested_by=bob)
    with pytest.raises(RerunError, match="already open"):
        rerun_request(run=run, requested_by=bob)
    assert RerunJob.objects.count() == 1


def test_cancel_only_before_a_worker_holds_it(run, bob):
    job = rerun_request(run=run, requested_by=bob)
    assert rerun_cancel(job=job)
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED
    running = job_for(RunFactory(), state=JobState.RUNNING)
    assert not rerun_cancel(job=running)


def test_claim_is_won_once(run):
    job = job_for(run)
    first = rerun_claim(job_pk=job.pk)
    assert first is not None and first.state == JobState.RUNNING and first.attempts == 1
    assert rerun_claim(job_pk=job.pk) is None  # the same job delivered again: not claimed


def test_claim_takes_over_from_a_dead_process_on_this_host(run):
    import socket
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    job = job_for(
        run, state=JobState.RUNNING, attempts=1, worker=f"{socket.gethostname()}:{dead.pid}"
    )
    claimed = rerun_claim(job_pk=job.pk)
    assert claimed is not None and claimed.attempts == 2
    # A live holder (this very process) keeps its claim.
    assert rerun_claim(job_pk=job.pk) is None


def test_claim_respects_max_attempts(run):
    job = job_for(run, attempts=3, max_attempts=3)
    assert rerun_claim(job_pk=job.pk) is None


def test_failed_attempt_goes_back_to_queued_until_out_of_attempts(run):
    job = job_for(run, max_attempts=2)
    job = rerun_claim(job_pk=job.pk)
    assert rerun_attempt_failed(job=job, error="boom", retry=True)
    job.refresh_from_db()
    assert job.state == JobState.QUEUED and job.error == "boom"
    job = rerun_claim(job_pk=job.pk)
    assert not rerun_attempt_failed(job=job, error="boom again", retry=True)
    job.refresh_from_db()
    assert job.state == JobState.FAILED and job.finished_at


def test_sweeper_fails_exhausted_and_requeues_stuck_jobs(run, settings):
    settings.RERUN_HARD_TIME_LIMIT = 600
    exhausted = job_for(run, attempts=3, max_attempts=3)
    long_ago = timezone.now() - timedelta(hours=2)
    stuck = job_for(RunFactory(), state=JobState.RUNNING, attempts=1, started_at=long_ago,
                    worker="elsewhere:1")  # fmt: skip
    stuck_last = job_for(RunFactory(), state=JobState.RUNNING, attempts=3, started_at=long_ago,
                         worker="elsewhere:2")  # fmt: skip
    fresh = job_for(RunFactory(), state=JobState.RUNNING, attempts=1, started_at=timezone.now())
    counts = rerun_sweep()
    states = {j: RerunJob.objects.get(pk=j.pk).state for j in (exhausted, stuck, stuck_last, fresh)}
    assert states == {
        exhausted: JobState.FAILED,
        stuck: JobState.QUEUED,
        stuck_last: JobState.FAILED,
        fresh: JobState.RUNNING,
    }
    assert counts["failed"] == 2 and counts["requeued"] == 1
    # No broker: nothing was sent, the requeued job waits.
    assert counts["sent"] == 0

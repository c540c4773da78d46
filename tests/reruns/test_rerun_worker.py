"""A real Celery worker against the real Redis and PostgreSQL: delivery itself is under test.

Each test starts `celery -A kernelindex worker --pool=prefork -c 1` as a subprocess on a queue
of its own (a random prefix), pointed at pytest's test database; rows are committed
(transactional_db) so that the worker sees them. The runner it executes is the CPU test
double (tests/rerun_double.py), never GPU data.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.conf import settings as django_settings
from django.db import connection, transaction
from kombu import pools as kombu_pools

from kernelindex.celery import app
from reruns.models import JobState, RerunJob, ResultReceipt
from reruns.services import rerun_dispatch, rerun_request, rerun_sweep
from runs.models import EvidenceEvent
from tests.factories import RunFactory
from tests.factories_attestations import login_staff
from tests.factories_reruns import DOUBLE_COMMAND, KEY_ID, KEY_SECRET, TEST_KEYS

REPO = Path(__file__).resolve().parents[2]
WAIT = 120  # seconds: an upper bound for the machine to get there, not a measurement


def _wait_for(predicate, what: str, timeout: float = WAIT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _database_url() -> str:
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgresql://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def _point_broker(url: str | None, settings) -> None:
    """Point this (web) process's Celery producer at `url`, dropping pooled connections."""
    settings.CELERY_BROKER_URL = url
    app.conf.broker_url = url
    kombu_pools.reset()  # the producer pools are global, keyed by connection
    app._pool = None
    app.amqp._producer_pool = None


class Worker:
    def __init__(self, tmp_path: Path, prefix: str, **env: str):
        self.log = tmp_path / "worker.log"
        self.queue = f"{prefix}gpu.h100"
        environ = {
            **os.environ,
            "DATABASE_URL": _database_url(),
            "DB_CONN_MAX_AGE": "0",
            "REDIS_URL": django_settings.REDIS_URL,
            "KERNELINDEX_QUEUE_PREFIX": prefix,
            "KERNELINDEX_RUNNER_COMMAND": " ".join(DOUBLE_COMMAND),
            "KERNELINDEX_WORKER_KEYS": json.dumps(TEST_KEYS),
            "KERNELINDEX_WORKER_KEY_ID": KEY_ID,
            "KERNELINDEX_WORKER_KEY": KEY_SECRET,
            "KERNELINDEX_RERUN_RETRY_BACKOFF": "1",
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "kernelindex", "worker",
                "-Q", self.queue, "--pool=prefork", "-c", "1", "-n", f"{prefix}@%h",
                "--without-gossip", "--without-mingle", "--without-heartbeat",
                "--loglevel=INFO",
            ],
            cwd=REPO,
            env=environ,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        _wait_for(lambda: "ready." in self.text() or self.proc.poll() is not None, "worker")
        assert self.proc.poll() is None, self.text()

    def text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


@pytest.fixture
def prefix(services, transactional_db, settings):
    prefix = f"test-{uuid.uuid4().hex[:10]}."
    settings.RERUN_QUEUE_PREFIX = prefix
    settings.KERNELINDEX_WORKER_KEYS = TEST_KEYS
    _point_broker(services, settings)
    yield prefix
    r = redis.Redis.from_url(services)
    for pattern in (
        f"{prefix}*",
        f"_kombu.binding.{prefix}*",
        f"_kombu.binding_permanent.{prefix}*",
    ):
        for key in r.scan_iter(pattern):
            r.delete(key)
    _point_broker(services, settings)


@pytest.fixture
def start_worker(prefix, tmp_path):
    workers: list[Worker] = []

    def start(**env: str) -> Worker:
        worker = Worker(tmp_path, prefix, **env)
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        worker.stop()


def _queue_length(prefix: str) -> int:
    return redis.Redis.from_url(django_settings.REDIS_URL).llen(f"{prefix}gpu.h100")


def _job(**fields) -> RerunJob:
    from django.utils import timezone

    return RerunJob.objects.create(
        run=RunFactory(), gpu_class="h100", state=JobState.QUEUED, issued_at=timezone.now()
    )


def _state(job: RerunJob) -> str:
    job.refresh_from_db()
    return job.state


def test_pool_process_killed_mid_job_is_redelivered_and_recorded_once(start_worker, tmp_path):
    marker = tmp_path / "runner-started"
    worker = start_worker(KI_DOUBLE_SLEEP_ONCE=str(marker))
    job = _job()
    assert rerun_dispatch(job=job)
    _wait_for(marker.exists, "the runner to start")
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.attempts == 1
    pool_pid = int(job.worker.rpartition(":")[2])
    assert pool_pid != worker.proc.pid  # the pool child, not the worker's main process
    os.kill(pool_pid, signal.SIGKILL)

    _wait_for(lambda: _state(job) == JobState.SUCCEEDED, "the redelivered job to finish")
    job.refresh_from_db()
    assert job.attempts == 2 and int(job.worker.rpartition(":")[2]) != pool_pid
    assert ResultReceipt.objects.filter(job=job).count() == 1
    assert EvidenceEvent.objects.filter(cause_job=job.uuid).count() == 1
    # The runner of the killed attempt died with its parent instead of running on.
    runner_pid = int(marker.read_text())
    _wait_for(lambda: not Path(f"/proc/{runner_pid}").exists() or _zombie(runner_pid), "runner")


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] == "Z"
    except (OSError, IndexError):
        return True


def test_the_same_job_delivered_twice_is_recorded_once(start_worker, prefix):
    job = _job()
    # Two messages for one job before any worker runs: a resend by the sweeper and the
    # original, say.
    assert rerun_dispatch(job=job) and rerun_dispatch(job=job)
    assert _queue_length(prefix) == 2
    worker = start_worker()
    _wait_for(lambda: "'not claimed'" in worker.text(), "the second delivery")
    assert _state(job) == JobState.SUCCEEDED
    job.refresh_from_db()
    assert job.attempts == 1
    assert ResultReceipt.objects.filter(job=job).count() == 1
    assert EvidenceEvent.objects.filter(cause_job=job.uuid).count() == 1


def test_dispatch_inside_a_rolled_back_transaction_sends_nothing(prefix, alice):
    alice.is_staff = True
    alice.save()
    run = RunFactory()
    with pytest.raises(RuntimeError), transaction.atomic():
        rerun_request(run=run, requested_by=alice)
        raise RuntimeError("the request fails after the job row was made")
    assert not RerunJob.objects.exists()
    assert _queue_length(prefix) == 0
    # The same order, committed, sends exactly one message.
    job = rerun_request(run=run, requested_by=alice)
    assert job.dispatched_at is not None
    assert _queue_length(prefix) == 1
    # The message is JSON and carries the job's primary key only, never a model instance.
    raw = json.loads(redis.Redis.from_url(django_settings.REDIS_URL).lindex(f"{prefix}gpu.h100", 0))
    assert raw["content-type"] == "application/json"
    assert raw["headers"]["task"] == "reruns.tasks.rerun_execute"
    body = json.loads(base64.b64decode(raw["body"]))
    assert body[0] == [job.pk] and body[1] == {}


def test_redis_down_when_ordered_then_sent_by_the_sweeper(
    start_worker, prefix, settings, client, alice, services
):
    alice.is_staff = True
    alice.save()
    run = RunFactory()
    _point_broker("redis://127.0.0.1:9/3", settings)  # nothing listens on port 9
    login_staff(client, alice)
    response = client.post(f"/runs/{run.public_id}/reruns/", {"gpu_class": "h100"}, follow=True)
    body = response.content.decode()
    assert response.status_code == 200
    assert "Rerun ordered but not sent yet: broker unreachable" in body
    job = RerunJob.objects.get()
    assert job.state == JobState.QUEUED and job.dispatched_at is None
    assert rerun_sweep()["sent"] == 0  # still down: still queued

    _point_broker(services, settings)  # Redis is back
    worker = start_worker()
    assert rerun_sweep()["sent"] == 1
    _wait_for(lambda: _state(job) == JobState.SUCCEEDED, "the swept job to finish")
    assert ResultReceipt.objects.filter(job=job).count() == 1
    # The worker logs the result after its commit: on a slow host the line can come later.
    _wait_for(lambda: "recorded: ok" in worker.text(), "the worker to log the result")


def test_lost_message_is_sent_again_by_the_sweeper(start_worker, prefix, settings):
    from datetime import timedelta

    from django.utils import timezone

    settings.RERUN_REDISPATCH_AFTER = 600
    job = _job()
    assert rerun_dispatch(job=job)
    r = redis.Redis.from_url(django_settings.REDIS_URL)
    assert r.delete(f"{prefix}gpu.h100") == 1  # the broker lost the message
    assert rerun_sweep()["resent"] == 0  # sent just now: not yet presumed lost
    RerunJob.objects.filter(pk=job.pk).update(dispatched_at=timezone.now() - timedelta(hours=1))
    assert rerun_sweep()["resent"] == 1
    start_worker()
    _wait_for(lambda: _state(job) == JobState.SUCCEEDED, "the re-sent job to finish")
    assert ResultReceipt.objects.filter(job=job).count() == 1


def test_a_whole_worker_killed_mid_job_is_requeued_by_its_silence_once(
    start_worker, prefix, tmp_path, settings
):
    """The worker's main process and its pool child SIGKILLed together (no one left to nack
    the message): the job's heartbeat stops, the sweeper requeues it after
    RERUN_HEARTBEAT_TIMEOUT rather than the broker's visibility timeout, sends one message,
    and a fresh worker records it once."""
    marker = tmp_path / "runner-started"
    worker = start_worker(KI_DOUBLE_SLEEP_ONCE=str(marker), KERNELINDEX_RERUN_HEARTBEAT_EVERY="1")
    job = _job()
    assert rerun_dispatch(job=job)
    _wait_for(marker.exists, "the runner to start")
    job.refresh_from_db()
    first_beat = job.heartbeat_at
    assert job.state == JobState.RUNNING and first_beat is not None
    # The running task beats while the runner runs.
    _wait_for(lambda: _beat(job) > first_beat, "a heartbeat after the claim")
    os.killpg(worker.proc.pid, signal.SIGKILL)
    worker.proc.wait(30)
    _wait_for(lambda: _queue_length(prefix) == 0, "the message to be taken")  # unacked, not queued
    last_beat = _beat(job)

    settings.RERUN_HEARTBEAT_TIMEOUT = 180
    # Within the timeout of its last beat, the job is left running (the worker may be busy).
    soon = rerun_sweep(now=last_beat + timedelta(seconds=179))
    assert soon["requeued"] == 0 and _state(job) == JobState.RUNNING
    # Past it (minutes, not the 5,400 s visibility timeout): requeued and sent, once.
    later = last_beat + timedelta(seconds=181)
    assert rerun_sweep(now=later) == {"failed": 0, "requeued": 1, "sent": 1, "resent": 0}
    assert rerun_sweep(now=later) == {"failed": 0, "requeued": 0, "sent": 0, "resent": 0}
    assert _queue_length(prefix) == 1

    start_worker()
    _wait_for(lambda: _state(job) == JobState.SUCCEEDED, "a fresh worker to finish the job")
    job.refresh_from_db()
    assert job.attempts == 2
    assert ResultReceipt.objects.filter(job=job).count() == 1
    assert EvidenceEvent.objects.filter(cause_job=job.uuid).count() == 1


def _beat(job: RerunJob):
    job.refresh_from_db()
    return job.heartbeat_at

"""Celery tasks: run one rerun job on a GPU worker, and the periodic sweeper.

A task takes the job's pk (never a model instance), claims the row, and does nothing if the
claim fails, so every redelivery and duplicate is harmless. The soft and hard time limits sit
below the broker's visibility timeout (settings), and the runner's own timeout below the soft
limit, so a slow runner is stopped by us and not by the broker handing the job to another
worker.
"""

from __future__ import annotations

import ctypes
import json
import logging
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, connection

from kilib import jsonbounds
from kirunner import sign
from reruns import services
from reruns.controlled import job_document

log = logging.getLogger(__name__)


def _die_with_parent() -> None:
    """In the runner's child process: be killed when the worker process dies (Linux), so a
    killed pool process leaves no orphan runner measuring on the GPU."""
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class RunnerFailed(RuntimeError):
    pass


def _wait(proc: subprocess.Popen, timeout: float, beat) -> tuple[str, str]:
    """The runner's (stdout, stderr) once it exits, calling `beat()` every
    RERUN_HEARTBEAT_EVERY seconds meanwhile; TimeoutExpired (runner killed) after `timeout`."""
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            try:
                every = max(0.1, min(settings.RERUN_HEARTBEAT_EVERY, left))
                return proc.communicate(timeout=every)
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    raise
                if beat is not None:
                    beat()
    except BaseException:  # over time, the soft time limit, a failed beat: no runner left on
        proc.kill()
        proc.communicate()
        raise


def run_runner(job_doc: dict, beat=None) -> dict:
    """Write JOB.json, run the configured runner command on it, return the parsed result.
    `beat` is called every RERUN_HEARTBEAT_EVERY seconds while the runner runs."""
    timeout = max(10, settings.RERUN_SOFT_TIME_LIMIT - 30)
    with tempfile.TemporaryDirectory(prefix="kirerun-") as tmp:
        job_path, result_path = Path(tmp, "JOB.json"), Path(tmp, "RESULT.json")
        job_path.write_text(json.dumps(job_doc, indent=2))
        command = [*settings.KERNELINDEX_RUNNER_COMMAND, str(job_path), "--out", str(result_path)]
        try:
            proc = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                preexec_fn=_die_with_parent,
            )
            stdout, stderr = _wait(proc, timeout, beat)
        except subprocess.TimeoutExpired:
            raise RunnerFailed(f"the runner did not finish within {timeout} s") from None
        except OSError as exc:
            raise RunnerFailed(f"cannot start the runner {command[0]!r}: {exc}") from None
        # Exit 1 means "result written, the job failed or was incorrect": still a result.
        if not result_path.exists():
            tail = (stderr or stdout or "").strip()[-2000:]
            raise RunnerFailed(f"the runner exited {proc.returncode} without a result: {tail}")
        try:
            return jsonbounds.loads(result_path.read_bytes())
        except ValueError as exc:  # not JSON, or outside jsonbounds' limits
            raise RunnerFailed(f"the runner wrote a result that is not JSON: {exc}") from None


def _beat(job) -> None:
    """One heartbeat; a database that does not answer for a moment must not stop a GPU
    measurement (a job silent for the whole timeout is requeued, which is the point)."""
    try:
        services.rerun_heartbeat(job=job)
    except DatabaseError as exc:
        log.warning("heartbeat of job %s not written: %s", job.uuid, exc)


@shared_task(
    name=services.EXECUTE_TASK,  # rerun_dispatch sends it by this name
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=settings.RERUN_SOFT_TIME_LIMIT,
    time_limit=settings.RERUN_HARD_TIME_LIMIT,
    max_retries=None,  # bounded by the row's max_attempts, which the claim enforces
)
def rerun_execute(self, job_pk: int) -> str:
    """Claim, run, sign with this worker's key, record. Returns what happened, for the log."""
    job = services.rerun_claim(job_pk=job_pk)
    if job is None:
        return "not claimed"
    document = job_document(job)
    # The runner may take most of an hour; a database connection left idle that long can be
    # dropped by the server or a proxy. Close it now and let Django open a fresh one after
    # (not inside a transaction: a test that calls the task directly runs in one).
    if not connection.in_atomic_block:
        connection.close()
    try:
        result = run_runner(document, beat=lambda: _beat(job))
        key_id, key = sign.key_from_env()
        sign.sign_result(result, key_id, key)
    except (RunnerFailed, SoftTimeLimitExceeded, sign.SigningError) as exc:
        error = f"attempt {job.attempts}: {exc or type(exc).__name__}"
        retry = not isinstance(exc, sign.SigningError)
        if services.rerun_attempt_failed(job=job, error=error, retry=retry):
            countdown = settings.RERUN_RETRY_BACKOFF * 2 ** (job.attempts - 1)
            raise self.retry(countdown=countdown, exc=exc) from None
        return f"failed: {error}"
    try:
        receipt = services.result_record(envelope=result, via="worker")
    except services.ResultRejected as exc:
        services.rerun_attempt_failed(job=job, error=f"result rejected: {exc}", retry=False)
        return f"rejected: {exc}"
    except Exception as exc:
        # A recording that crashed must still end the job, with the reason: otherwise it
        # stays running until the sweeper's hard limit and says nothing.
        log.exception("recording the result of job %s failed", job.uuid)
        error = f"recording the result failed: {type(exc).__name__}: {exc}"
        services.rerun_attempt_failed(job=job, error=error, retry=False)
        return f"failed: {error}"
    return f"recorded: {receipt.status}"


@shared_task(acks_late=True, soft_time_limit=120, time_limit=150)
def rerun_sweep() -> dict:
    return services.rerun_sweep()

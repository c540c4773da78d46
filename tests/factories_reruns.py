"""Helpers for the rerun tests: jobs, results made by the CPU test double, signing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from django.utils import timezone

from kirunner.sign import parse_key, sign_result
from reruns.controlled import job_document
from reruns.models import JobState, RerunJob

DOUBLE = Path(__file__).resolve().parent / "rerun_double.py"
DOUBLE_COMMAND = [sys.executable, str(DOUBLE)]
KEY_ID = "test-worker-1"
KEY_SECRET = "a1" * 32  # 32 bytes as hex; a test key, public on purpose
TEST_KEYS = {KEY_ID: KEY_SECRET}


def job_for(run, *, state: str = JobState.QUEUED, gpu_class: str = "h100", **fields) -> RerunJob:
    issued = timezone.now() if state != JobState.AWAITING_APPROVAL else None
    return RerunJob.objects.create(
        run=run, gpu_class=gpu_class, state=state, issued_at=issued, **fields
    )


def double_result(job: RerunJob, **env: str) -> dict:
    """Run the CPU test double on the job's file; return its unsigned result."""
    with tempfile.TemporaryDirectory() as tmp:
        job_path, out = Path(tmp, "JOB.json"), Path(tmp, "RESULT.json")
        job_path.write_text(json.dumps(job_document(job)))
        subprocess.run(
            [*DOUBLE_COMMAND, str(job_path), "--out", str(out)],
            check=False,
            env={**os.environ, **env},
            timeout=60,
        )
        return json.loads(out.read_text())


def sign(envelope: dict, key_id: str = KEY_ID, secret: str = KEY_SECRET) -> dict:
    return sign_result(envelope, key_id, parse_key(secret))

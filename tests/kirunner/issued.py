"""The RerunJob documents bench/h200/issue_jobs.py issues for upstream CI's 02bac05 H200 rows,
for the family tests that check every row becomes a job the runner accepts."""

from __future__ import annotations

import importlib.util
import secrets
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

from tests.conftest import LIGER_CI, REPO


def issue_jobs_module():
    """bench/h200/issue_jobs.py, a script rather than a package module."""
    path = REPO / "bench" / "h200" / "issue_jobs.py"
    module_spec = importlib.util.spec_from_file_location("issue_jobs", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def issued_documents(selection: str, kernels) -> Iterator[tuple[object, dict]]:
    """(run, job document) for each row of `kernels` that issue_jobs' `selection` picks
    ("all_h200" or "unjudged_h200"), after ingesting the 02bac05 folder. Needs the db."""
    from reruns.controlled import job_document
    from reruns.models import RerunJob
    from runs.sources.pipeline import ingest

    ingest(source_slug="liger-kernel-ci", locations=[str(LIGER_CI / "02bac05")])
    for run in getattr(issue_jobs_module(), f"selected_{selection}")():
        if run.benchmark.slug not in kernels:
            continue
        job = RerunJob(run=run, gpu_class="h200", nonce=secrets.token_hex(16),
                       uuid=uuid.uuid4(), issued_at=datetime.now(UTC))  # fmt: skip
        yield run, job_document(job)

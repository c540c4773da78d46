"""Scheduled sync of an upstream source: fetch its configured locations, ingest each file
through the pipeline, and record every fetch, failed or not, in the ledger.

1. Take the source's lock (an atomic cache add with an expiry): a second sync of the same
   source while one runs returns at once, and a crashed worker's lock expires.
2. For each location, in order: fetch with the source's timeout and ingest it in its own
   transaction. A failure (404, timeout, truncated download, bad rows) is a ledger entry and
   the sync goes on with the next location.
3. Release the lock (only if it is still ours).

Idempotent: ingest finds unchanged bytes unchanged. Resumable: files that committed stay
committed, so a sync cut short is completed by the next one.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

from django.conf import settings
from django.core.cache import cache

from runs.changes.services import changes_detect_after_ingest
from runs.sources import fetch, source_module
from runs.sources.base import IngestError, InputFile
from runs.sources.documents import Resolver
from runs.sources.ledger import ledger_append
from runs.sources.pipeline import ingest_file, source_ensure

logger = logging.getLogger(__name__)


@dataclass
class SyncOutcome:
    source: str
    locked: bool = False  # another sync of this source held the lock: nothing was done
    outcomes: list[str] = field(default_factory=list)  # per location: created, failed, ...


def _lock_key(slug: str) -> str:
    return f"runs:source-sync:{slug}"


def source_sync(*, slug: str) -> SyncOutcome:
    config = settings.SOURCE_SYNC.get(slug) or {}
    locations = list(config.get("locations") or [])
    module = source_module(slug)
    outcome = SyncOutcome(slug)
    token = uuid.uuid4().hex
    if not cache.add(_lock_key(slug), token, timeout=settings.SOURCE_SYNC_LOCK_SECONDS):
        outcome.locked = True
        logger.info("sync of %s skipped: another sync holds its lock", slug)
        return outcome
    try:
        source = source_ensure(module.SLUG, module.META)
        resolver = Resolver()
        reports: list = []
        for location in locations:
            outcome.outcomes.append(
                _sync_one(
                    source, module, location, float(config.get("timeout", 60)), resolver, reports
                )
            )
        # The cells the new publications touched, judged once for the whole sync; watchers
        # hear of it in one batch (runs.signals).
        changes_detect_after_ingest(source=source, reports=reports, trigger="sync")
    finally:
        if cache.get(_lock_key(slug)) == token:
            cache.delete(_lock_key(slug))
    return outcome


def _sync_one(
    source, module, location: str, timeout: float, resolver: Resolver, reports: list
) -> str:
    item = InputFile(location, b"", "")
    try:
        with fetch.timeout(timeout):
            items = module.inputs([location])
        outcomes = []
        for item in items:
            report = ingest_file(
                source=source, module=module, item=item, resolver=resolver, trigger="sync"
            )
            reports.append(report)
            changed = "created" if report.created else "revised" if report.revised else ""
            outcomes.append(changed or "unchanged")
        return ",".join(outcomes)
    except IngestError as exc:
        # The failed file's transaction rolled back; its entry is written after, on its own.
        ledger_append(
            source=source, publication=None, item=item, report=None, trigger="sync",
            error=str(exc),
        )  # fmt: skip
        logger.warning("sync of %s: %s", source.slug, exc)
        return "failed"

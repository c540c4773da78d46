"""Celery tasks of the run data: the scheduled upstream sync (beat entries come from
settings.SOURCE_SYNC, one per configured source)."""

from __future__ import annotations

from celery import shared_task

from runs.sources.sync import source_sync as sync_service


@shared_task(name="runs.tasks.source_sync", soft_time_limit=1800, time_limit=1900)
def source_sync(slug: str) -> dict:
    outcome = sync_service(slug=slug)
    return {"source": outcome.source, "locked": outcome.locked, "outcomes": outcome.outcomes}

"""What runs announces (runs.signals, sent after the causing write commits) becomes a notice
task. Connected in AttestationsConfig.ready()."""

from __future__ import annotations

import logging

from django.conf import settings

from attestations import tasks
from attestations.watching.services import new_batch
from kilib.origin import site_root
from runs.signals import evidence_moved, publications_ingested

logger = logging.getLogger(__name__)


def dispatch(task, **kwargs) -> None:
    """To the workers when there is a broker; without one (a laptop, `manage.py ingest` with
    no REDIS_URL) in this process, as email goes to the console without EMAIL_HOST. An
    unreachable broker is logged and the task runs here: a notice is not worth losing. The
    task carries the origin of the links being served (SITE_ROOT in production; under DEBUG
    without it, the request's or the command's), since a worker has no request to ask."""
    kwargs["origin"] = site_root()
    if settings.CELERY_BROKER_URL:
        try:
            task.apply_async(kwargs=kwargs, retry=False)
            return
        except Exception as exc:  # noqa: BLE001 - any transport error means "not sent"
            logger.warning("notice task %s not queued (%s); running it here", task.name, exc)
    task.run(**kwargs)


def on_publications_ingested(sender, *, source_id, publication_ids, step_ids, **kwargs) -> None:
    # One batch per ingest or sync: one email per user, however many files it brought.
    dispatch(
        tasks.notices_sync,
        batch=new_batch(),
        source_id=source_id,
        publication_ids=publication_ids,
        step_ids=step_ids,
    )


def on_evidence_moved(sender, *, event_id, **kwargs) -> None:
    dispatch(tasks.notices_evidence, event_id=event_id)


def connect() -> None:
    publications_ingested.connect(on_publications_ingested, dispatch_uid="watching-publications")
    evidence_moved.connect(on_evidence_moved, dispatch_uid="watching-evidence")

"""Celery tasks of the community app: watch notices (attestations/watching/services.py).

Each takes ids, never model instances, and is safe to run twice: notices are unique per user
and subject and claimed before they are sent. `origin` is the origin of the links the
dispatching request or command served (kilib.origin.links_origin); "" for SITE_ROOT."""

from __future__ import annotations

from celery import shared_task

from attestations.watching import services
from kilib.origin import links_origin


@shared_task(name="attestations.notices_sync", soft_time_limit=240, time_limit=300)
def notices_sync(
    batch: str, source_id: int, publication_ids: list, step_ids: list, origin: str = ""
) -> int:
    with links_origin(origin):
        return services.notices_for_sync(
            batch=batch, source_id=source_id, publication_ids=publication_ids, step_ids=step_ids
        )


@shared_task(name="attestations.notices_evidence", soft_time_limit=60, time_limit=90)
def notices_evidence(event_id: int, origin: str = "") -> int:
    with links_origin(origin):
        return services.notices_for_evidence(event_id=event_id)


@shared_task(name="attestations.notices_attestations", soft_time_limit=60, time_limit=90)
def notices_attestations(attestation_ids: list, origin: str = "") -> int:
    with links_origin(origin):
        return services.notices_for_attestations(attestation_ids=attestation_ids)

"""Re-judge a group's claims once an evidence event of one of its runs is committed."""

from __future__ import annotations

from django.db import transaction
from django.db.models.signals import post_save
from django.dispatch import receiver

from runs.models import EvidenceEvent


@receiver(post_save, sender=EvidenceEvent, dispatch_uid="claims-rejudge-group")
def _rejudge(sender, instance: EvidenceEvent, created: bool, **kwargs) -> None:
    if not created or instance.controlled_run_id is None:
        return
    group_id = instance.run.group_id
    if group_id is None:
        return
    from runs.claims.services import claims_judge

    transaction.on_commit(lambda: claims_judge([group_id]))

"""Re-judge a group's claims once an evidence event of one of its runs is committed."""

from __future__ import annotations

from django.db import transaction
from django.db.models.signals import post_save
from django.dispatch import receiver

from runs.models import EvidenceEvent


class _GroupsToJudge:
    """One commit callback a transaction, judging every group its events named once: the
    demo's reruns (5,976 events in 1,985 groups, a transaction per batch) loaded in 130.5 s
    judging at every event and in 99.2 s so (bench/demo_load.py on SQLite, 2026-12-06)."""

    def __init__(self, group_id: int):
        self.group_ids = {group_id}

    def __call__(self) -> None:
        from runs.claims.services import claims_judge

        claims_judge(sorted(self.group_ids))


@receiver(post_save, sender=EvidenceEvent, dispatch_uid="claims-rejudge-group")
def _rejudge(sender, instance: EvidenceEvent, created: bool, **kwargs) -> None:
    if not created or instance.controlled_run_id is None:
        return
    group_id = instance.run.group_id
    if group_id is None:
        return
    # The transaction's callback if it has one still to run; a savepoint rolled back with the
    # one that registered it takes it away, and the next event registers another.
    waiting = transaction.get_connection().run_on_commit
    pending = next((f for _, f, _ in waiting if isinstance(f, _GroupsToJudge)), None)
    if pending is None:
        transaction.on_commit(_GroupsToJudge(group_id))
    else:
        pending.group_ids.add(group_id)

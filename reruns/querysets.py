from __future__ import annotations

from datetime import datetime

from django.db import models


class RerunJobQuerySet(models.QuerySet):
    def for_run(self, run) -> RerunJobQuerySet:
        """Jobs of every revision of the run: a revision keeps its public id."""
        return self.filter(run__public_id=run.public_id)

    def for_panel(self) -> RerunJobQuerySet:
        """Newest first, with what a run page's rerun panel shows of each job."""
        return self.select_related(
            "requested_by", "receipt__controlled_run", "receipt__evidence_event"
        ).order_by("-created_at")

    def never_sent(self) -> RerunJobQuerySet:
        """Queued but never handed to a broker (none configured, or it was down)."""
        return self.filter(state="queued", dispatched_at__isnull=True, offline=False)

    def sent_before(self, moment: datetime) -> RerunJobQuerySet:
        """Queued, sent, and still not claimed: the message may be lost."""
        return self.filter(state="queued", dispatched_at__lt=moment, offline=False)

    def running_since_before(self, moment: datetime) -> RerunJobQuerySet:
        return self.filter(state="running", started_at__lt=moment)

    def silent_since(self, moment: datetime) -> RerunJobQuerySet:
        """Running, and no heartbeat since `moment`: the worker is gone."""
        return self.filter(state="running", heartbeat_at__lt=moment)


class ResultReceiptQuerySet(models.QuerySet):
    def of_controlled_run(self, run):
        """The receipt of the result a controlled run was made from, or None."""
        return self.filter(controlled_run=run).first()

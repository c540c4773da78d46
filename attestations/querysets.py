from __future__ import annotations

from django.db import models
from django.db.models import Q


class AttestationQuerySet(models.QuerySet):
    def approved(self) -> AttestationQuerySet:
        return self.filter(state="approved")

    def pending(self) -> AttestationQuerySet:
        return self.filter(state="pending")

    def visible_to(self, user) -> AttestationQuerySet:
        """Approved items, plus the user's own pending ones (shown to them marked pending)."""
        if user is not None and user.is_authenticated:
            return self.filter(Q(state="approved") | Q(state="pending", author=user))
        return self.approved()

    def readable_by(self, user) -> AttestationQuerySet:
        """What a user may open: approved items, and their own in any state (with the
        moderator's reason when refused)."""
        if user is not None and user.is_authenticated:
            return self.filter(Q(state="approved") | Q(author=user))
        return self.approved()

    def for_run(self, run) -> AttestationQuerySet:
        # By public id, so items stay with the run when an upstream change adds a revision.
        return self.filter(run__public_id=run.public_id)

    def by(self, user) -> AttestationQuerySet:
        return self.filter(author=user)

    def unpublished(self) -> AttestationQuerySet:
        """Pending, rejected, hidden and withdrawn items: what only their author and moderators
        see."""
        return self.exclude(state="approved")

    def measured(self) -> AttestationQuerySet:
        """Reproductions whose figures come from an uploaded result file."""
        return self.exclude(result_digest="")

    def for_benchmark(self, benchmark) -> AttestationQuerySet:
        return self.filter(run__benchmark=benchmark)

    def benchmark_ids(self) -> frozenset[int]:
        """Pks of the benchmarks these items' runs measure."""
        return frozenset(self.order_by().values_list("run__benchmark_id", flat=True).distinct())

    def with_related(self) -> AttestationQuerySet:
        # The run's GPU says whether a median compares with the published one; the stored
        # result file is read only where it is shown (the detail page, the admin).
        return self.select_related(
            "author", "gpu", "run__benchmark", "run__implementation", "run__environment__gpu"
        ).defer("result_document")


class ReportQuerySet(models.QuerySet):
    def open(self) -> ReportQuerySet:
        return self.filter(state="open")

    def by(self, user) -> ReportQuerySet:
        return self.filter(reporter=user)

    def for_run(self, run) -> ReportQuerySet:
        return self.filter(run__public_id=run.public_id)

    def answered_publicly(self) -> ReportQuerySet:
        """Resolved reports with an answer: the run page shows these."""
        return self.filter(state="resolved").exclude(answer="")

    def in_answer_order(self) -> ReportQuerySet:
        return self.order_by("answered_at")


class PosterBanQuerySet(models.QuerySet):
    def active(self) -> PosterBanQuerySet:
        return self.filter(lifted_at=None)


class ApiTokenQuerySet(models.QuerySet):
    def active(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at=None)

    def of(self, user) -> ApiTokenQuerySet:
        return self.filter(user=user)

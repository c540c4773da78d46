"""Reads of the judged claims (runs/claims/models.py): each a filter on an index of
JudgedClaim.Meta."""

from __future__ import annotations

from django.db import models


class JudgedClaimQuerySet(models.QuerySet):
    def of_run(self, group_id: int, run_id: int) -> JudgedClaimQuerySet:
        """The claims run `run_id` is a side of, in its group (the group's index), most
        severe first."""
        return (
            self.filter(group_id=group_id)
            .filter(models.Q(better_id=run_id) | models.Q(other_id=run_id))
            .order_by("severity", "id")
        )

    def between(self, group_id: int, a: str, b: str) -> JudgedClaimQuerySet:
        """The claim judged between runs a and b (public ids, either way round) of one group:
        the group's index, then the pair."""
        return self.filter(group_id=group_id).filter(
            models.Q(better__public_id=a, other__public_id=b)
            | models.Q(better__public_id=b, other__public_id=a)
        )

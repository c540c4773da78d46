"""Judged claims, stored so the pages that show speed-ups read them with one query per data
change (runs/claims/read.py) rather than judging on every request."""

from __future__ import annotations

from django.db import models

from runs.claims import rule
from runs.claims.querysets import JudgedClaimQuerySet


class Verdict(models.TextChoices):
    HOLDS = rule.HOLDS, "Holds"
    OVERSTATED = rule.OVERSTATED, "Overstated"
    UNDERSTATED = rule.UNDERSTATED, "Understated"
    REVERSED = rule.REVERSED, "Reversed"
    TIE_CONFIRMED = rule.TIE_CONFIRMED, "Tie confirmed"
    TIE_BROKEN = rule.TIE_BROKEN, "Tie broken"


class JudgedClaim(models.Model):
    """The claim that `better` (lower published figure) beats `other` in one group, judged
    by controlled reruns of both from one runner process. The published runs are untouched."""

    source = models.ForeignKey(
        "runs.Source", on_delete=models.CASCADE, related_name="judged_claims"
    )
    group = models.ForeignKey(
        "runs.ComparisonGroup", on_delete=models.CASCADE, related_name="claims"
    )
    better = models.ForeignKey(
        "runs.Run", on_delete=models.CASCADE, related_name="claims_as_better"
    )
    other = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="claims_as_other")
    better_controlled = models.ForeignKey(
        "runs.Run",
        on_delete=models.CASCADE,
        related_name="+",
        help_text="controlled rerun of better",
    )
    other_controlled = models.ForeignKey(
        "runs.Run",
        on_delete=models.CASCADE,
        related_name="+",
        help_text="controlled rerun of other",
    )
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    severity = models.PositiveSmallIntegerField(
        help_text="0 reversed, 1 overstated, 2 tie broken, 3 understated, 4 holds, 5 tie confirmed"
    )
    published_ratio = models.FloatField()
    controlled_ratio = models.FloatField(help_text="other / better on the claim's own basis")
    device_ratio = models.FloatField(
        null=True, blank=True, help_text="latency: other / better by the cold device times"
    )
    tolerance = models.FloatField(help_text="the cells' combined tolerance")
    basis = models.CharField(max_length=32)
    process = models.CharField(max_length=100)
    why = models.TextField()
    judged_at = models.DateTimeField(auto_now=True)

    objects = JudgedClaimQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["better", "other"], name="claim_unique_pair"),
        ]
        indexes = [
            # The source's page: reversed and overstated first.
            models.Index(fields=["source", "severity", "id"], name="claim_source_severity"),
            # Its counts per verdict, from the index alone.
            models.Index(fields=["source", "verdict"], name="claim_source_verdict"),
            models.Index(fields=["group"], name="claim_group"),
        ]

    def __str__(self) -> str:
        return f"{self.better_id} vs {self.other_id}: {self.verdict}"

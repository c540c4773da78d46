"""Community data: reproductions and notes on runs, issue reports, moderation, API tokens.

Nothing here points at a run's evidence level: attestations and reports sit beside a run and
never write to it (see runs.models.Run.evidence and tests/attestations/test_evidence_rule.py).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from attestations.querysets import (
    ApiTokenQuerySet,
    AttestationQuerySet,
    PosterBanQuerySet,
    ReportQuerySet,
)
from runs.models import AppendOnly, Gpu, Run
from runs.querysets import AppendOnlyQuerySet


class Kind(models.TextChoices):
    REPRODUCTION = "reproduction", "Reproduction"
    NOTE = "note", "Note"


class State(models.TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    HIDDEN = "hidden", "Hidden"
    WITHDRAWN = "withdrawn", "Withdrawn"


class Attestation(models.Model):
    """A user's reproduction (their own measurement of the run's workload) or note.

    Measured values are stored like runs store theirs: integer nanoseconds for latency, integer
    bytes for memory, whatever unit the author typed.
    """

    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="attestations")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="attestations"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    state = models.CharField(
        max_length=16, choices=State.choices, default=State.PENDING, db_index=True
    )

    median = models.BigIntegerField(null=True, blank=True)
    p20 = models.BigIntegerField(null=True, blank=True)
    p80 = models.BigIntegerField(null=True, blank=True)
    unit = models.CharField(max_length=8, blank=True)  # "ns" or "B", as on runs
    gpu = models.ForeignKey(
        Gpu, on_delete=models.PROTECT, null=True, blank=True, related_name="attestations"
    )
    driver_version = models.CharField(max_length=64, blank=True)
    cuda_version = models.CharField(max_length=64, blank=True)
    torch_version = models.CharField(max_length=64, blank=True)
    other_versions = models.CharField(max_length=300, blank=True)
    harness = models.CharField(max_length=200, blank=True)
    commit_url = models.URLField(max_length=500, blank=True)
    body = models.TextField(blank=True, help_text="Markdown")

    # A measured reproduction: the result file of a self-run job, stored as uploaded (checked
    # by attestations/measured.py); the columns above and below are read from it, not typed.
    result_document = models.JSONField(null=True, blank=True)
    result_digest = models.CharField(max_length=80, blank=True)
    runner_version = models.CharField(max_length=32, blank=True)
    device = models.CharField(max_length=8, blank=True, help_text="cuda or cpu, from the file")
    device_ns = models.BigIntegerField(
        null=True, blank=True, help_text="Cold device time per call (ns), from the diagnostics"
    )
    classification = models.CharField(
        max_length=16, blank=True, help_text="device-bound, host-bound or unexplained"
    )

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    moderation_reason = models.CharField(max_length=500, blank=True)
    moderated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    moderated_at = models.DateTimeField(null=True, blank=True)

    objects = AttestationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["run", "state"], name="attestation_run_state"),
            models.Index(fields=["author", "state"], name="attestation_author_state"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} #{self.pk} on run {self.run.public_id}"

    def get_absolute_url(self) -> str:
        return reverse("attestations:detail", args=[self.pk])

    @property
    def is_editable(self) -> bool:
        # A measured reproduction is its result file: to change it, upload another.
        return self.state == State.PENDING and not self.is_measured

    @property
    def is_measured(self) -> bool:
        # The digest, not the document: lists defer the document (tens of kB each).
        return bool(self.result_digest)

    def not_comparable(self) -> str:
        """Why this reproduction's median cannot be set against the published one, or ''.
        A figure from another GPU product (an A100 against an H100 run), a CPU run or an
        unnamed GPU measures something else: no deviation is shown for it."""
        if self.median is None or self.unit != self.run.unit or not self.run.median:
            return "nothing to compare"
        if self.device == "cpu":
            return "a CPU run with scaled-down shapes: not comparable"
        if self.gpu is None:
            return "no GPU named: not comparable"
        if self.gpu.product != self.run.environment.gpu.product:
            return "another GPU: not comparable"
        return ""

    def delta_percent(self) -> float | None:
        """Signed difference of the measured median from the run's published median, in %,
        only when it was measured on the run's GPU product (not_comparable says why not)."""
        if self.not_comparable():
            return None
        return (self.median - self.run.median) * 100.0 / self.run.median


class ReportCategory(models.TextChoices):
    WRONG_DATA = "wrong_data", "Wrong data"
    DUPLICATE = "duplicate", "Duplicate"
    BROKEN_LINK = "broken_link", "Broken link"
    OTHER = "other", "Other"


class ReportState(models.TextChoices):
    OPEN = "open", "Open"
    TRIAGED = "triaged", "Triaged"
    RESOLVED = "resolved", "Resolved"
    DISMISSED = "dismissed", "Dismissed"


class Report(models.Model):
    """An issue with a run, raised by a user and answered by a maintainer."""

    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="reports")
    reporter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="reports"
    )
    category = models.CharField(max_length=16, choices=ReportCategory.choices)
    text = models.TextField()
    state = models.CharField(
        max_length=16, choices=ReportState.choices, default=ReportState.OPEN, db_index=True
    )
    answer = models.TextField(blank=True, help_text="Shown to the reporter; public once resolved")
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    answered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ReportQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"Report #{self.pk} on run {self.run.public_id}"


class ModerationEvent(AppendOnly):
    """Append-only audit trail: who did what to which item, from which state to which, and why.
    The trail is evidence of what moderators did; rows are written once and never changed."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    action = models.CharField(max_length=32)
    attestation = models.ForeignKey(
        Attestation, on_delete=models.CASCADE, null=True, blank=True, related_name="events"
    )
    report = models.ForeignKey(
        Report, on_delete=models.CASCADE, null=True, blank=True, related_name="events"
    )
    subject = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="moderation_events",
        help_text="The user a ban or unban applies to",
    )
    change_review = models.ForeignKey(
        "runs.ChangeReview", on_delete=models.PROTECT, null=True, blank=True, related_name="+",
        help_text="The detected change a maintainer acknowledged or dismissed",
    )  # fmt: skip
    from_state = models.CharField(max_length=16, blank=True)
    to_state = models.CharField(max_length=16, blank=True)
    reason = models.CharField(max_length=500, blank=True)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        target = self.attestation or self.report or self.subject or self.change_review
        return f"{self.action} {target} by {self.actor}"


class PosterBan(models.Model):
    """While a ban is active (not lifted) the user cannot post attestations or reports."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="poster_bans"
    )
    reason = models.CharField(max_length=500)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    lifted_at = models.DateTimeField(null=True, blank=True)

    objects = PosterBanQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["user"], condition=models.Q(lifted_at=None), name="one_active_ban"
            )
        ]

    def __str__(self) -> str:
        return f"Ban of {self.user}"


class ApiToken(models.Model):
    """A bearer token for the API. Only its SHA-256 is stored; the token is shown once."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, help_text="The token's first characters, to tell it")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


# Watching lives in its own package (attestations/watching/).
from attestations.watching.models import Notice, Watch  # noqa: E402, F401

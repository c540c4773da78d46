"""Rerun jobs, the receipt of their one recorded result, and the log of rejected results.

The job row is the truth about a rerun; the broker only carries its primary key. A worker
claims the row with a conditional UPDATE, so a message delivered twice runs at most once at a
time, and the receipt's one-to-one constraint means a result is recorded once whatever is
delivered twice.
"""

from __future__ import annotations

import secrets
import uuid

from django.conf import settings
from django.db import models
from django.urls import reverse

from reruns.querysets import RerunJobQuerySet, ResultReceiptQuerySet
from runs.models import EvidenceEvent, Run


def _nonce() -> str:
    return secrets.token_hex(16)


class JobState(models.TextChoices):
    AWAITING_APPROVAL = "awaiting-approval", "Awaiting approval"
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


ACTIVE_STATES = (JobState.AWAITING_APPROVAL, JobState.QUEUED, JobState.RUNNING)
FINISHED_STATES = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


class RerunJob(models.Model):
    """A controlled re-measurement of one run on one GPU class.

    States:
    1. awaiting-approval: asked for by a logged-in user; a maintainer approves it in the admin
       (or cancels it). Staff orders skip this step.
    2. queued: approved; `issued_at` is set and the job is sent to the queue gpu.<class> once
       the approving transaction commits. `dispatched_at` stays empty while the broker is
       unreachable or unconfigured; the sweeper sends it later.
    3. running: a worker claimed the row (conditional UPDATE from queued) and runs the runner;
       `attempts` counts claims, `worker` names the claiming process.
    4. succeeded: a verified result was recorded (ResultReceipt), whatever its verdict.
       failed: out of attempts, the runner could not produce a result, or the result said the
       job could not run. cancelled: a maintainer declined or withdrew it.
    A retry puts a running job back to queued; nothing leaves succeeded, failed or cancelled.
    """

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    nonce = models.CharField(max_length=64, unique=True, default=_nonce, editable=False)
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="rerun_jobs")
    gpu_class = models.SlugField(max_length=32)
    state = models.CharField(
        max_length=20, choices=JobState.choices, default=JobState.AWAITING_APPROVAL, db_index=True
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    worker = models.CharField(max_length=200, blank=True, help_text="host:pid of the last claim")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    issued_at = models.DateTimeField(null=True, blank=True, help_text="Approved and queued")
    dispatched_at = models.DateTimeField(null=True, blank=True, help_text="Last sent to broker")
    started_at = models.DateTimeField(null=True, blank=True)
    # Written by the running task every RERUN_HEARTBEAT_EVERY seconds: a job whose beat stops
    # lost its worker (even one SIGKILLed whole) and is requeued by the sweeper within minutes.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    # Ordered for a GPU host without broker access: exported as a job file and imported as a
    # result file, never sent to a queue.
    offline = models.BooleanField(default=False)
    dispatch_error = models.TextField(blank=True, help_text="Why the last send failed, if it did")

    objects = RerunJobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # One open job per run and GPU class: a second order while one is pending is a
            # clear error, not a second GPU run.
            models.UniqueConstraint(
                fields=["run", "gpu_class"],
                condition=models.Q(state__in=["awaiting-approval", "queued", "running"]),
                name="rerunjob_one_open_per_run_class",
            )
        ]

    def __str__(self) -> str:
        return f"Rerun {str(self.uuid)[:8]} of {self.run.public_id} on {self.gpu_class}"

    def get_absolute_url(self) -> str:
        return reverse("runs:detail", args=[self.run.public_id]) + f"#rerun-{self.uuid}"

    @property
    def queue(self) -> str:
        return queue_name(self.gpu_class)

    @property
    def is_finished(self) -> bool:
        return self.state in FINISHED_STATES


def queue_name(gpu_class: str) -> str:
    """gpu.<class>; tests prefix it so that their queues are their own."""
    return f"{settings.RERUN_QUEUE_PREFIX}gpu.{gpu_class}"


class ResultReceipt(models.Model):
    """The one recorded result of a job. The one-to-one on `job` is what makes recording
    idempotent: a second result for the same job cannot be stored, whichever path it took."""

    job = models.OneToOneField(RerunJob, on_delete=models.PROTECT, related_name="receipt")
    key_id = models.CharField(max_length=100)
    signature = models.CharField(max_length=128, unique=True)
    payload_digest = models.CharField(max_length=71)
    # The whole signed payload, raw samples included, so the page can show the spread and
    # anyone can re-verify the signature later.
    payload = models.JSONField()
    status = models.CharField(max_length=32, help_text="The runner's status: ok, incorrect, ...")
    device = models.CharField(max_length=16, blank=True)
    via = models.CharField(max_length=16, help_text="worker, import or demo")
    controlled_run = models.OneToOneField(
        Run, on_delete=models.PROTECT, null=True, blank=True, related_name="rerun_receipt"
    )
    evidence_event = models.OneToOneField(
        EvidenceEvent, on_delete=models.PROTECT, null=True, blank=True, related_name="receipt"
    )
    received_at = models.DateTimeField(auto_now_add=True)

    objects = ResultReceiptQuerySet.as_manager()

    def __str__(self) -> str:
        return f"Result of {self.job}"

    @property
    def measurement(self) -> dict:
        return self.payload.get("measurement") or {}

    @property
    def environment(self) -> dict:
        return self.payload.get("environment") or {}


class RejectReason(models.TextChoices):
    MALFORMED = "malformed", "Malformed"
    UNKNOWN_KEY = "unknown-key", "Unknown key id"
    TAMPERED = "tampered", "Bad signature"
    FOREIGN_JOB = "foreign-job", "Not this job's result"
    REPLAY = "replay", "Replay of a finished job"
    STALE = "stale", "Outside the freshness window"
    UNKNOWN_GPU = "unknown-gpu", "GPU not in the catalogue"
    IMPLAUSIBLE = "implausible", "Figures not physically possible"


class RejectedResult(models.Model):
    """A result that was refused, and why. Written outside the recording transaction so the
    log survives the refusal; nothing else changes."""

    reason = models.CharField(max_length=16, choices=RejectReason.choices, db_index=True)
    detail = models.TextField()
    job = models.ForeignKey(
        RerunJob, on_delete=models.SET_NULL, null=True, blank=True, related_name="rejections"
    )
    job_ref = models.CharField(max_length=100, blank=True, help_text="The job id it claimed")
    key_id = models.CharField(max_length=100, blank=True)
    payload_digest = models.CharField(max_length=71, blank=True)
    via = models.CharField(max_length=16)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-received_at", "-id"]

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail[:80]}"

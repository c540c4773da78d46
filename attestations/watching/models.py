"""What a user watches and what they were told.

A Watch names one target: a benchmark, a source, or a cell (a comparison cell and a provider,
what the run page's history follows; `run` is the run it was started from, for its title and
link). A Notice is one thing a user was told about, unique per user and subject key, so a
re-run sync, a redelivered task or a recomputed change can never send it twice.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from attestations.watching.querysets import WatchQuerySet


class Watch(models.Model):
    class Target(models.TextChoices):
        BENCHMARK = "benchmark", "Benchmark"
        CELL = "cell", "Cell"
        SOURCE = "source", "Source"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="watches"
    )
    target = models.CharField(max_length=16, choices=Target.choices)
    benchmark = models.ForeignKey(
        "runs.Benchmark", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    source = models.ForeignKey(
        "runs.Source", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    cell_key = models.CharField(max_length=71, blank=True)
    provider_key = models.CharField(max_length=64, blank=True)
    run = models.ForeignKey(
        "runs.Run", on_delete=models.PROTECT, null=True, blank=True, related_name="+",
        db_index=False,
    )  # fmt: skip
    publications = models.BooleanField("new publications", default=True)
    regressions = models.BooleanField("detected regressions", default=True)
    improvements = models.BooleanField("detected improvements", default=False)
    evidence = models.BooleanField("evidence-level changes", default=True)
    attestations = models.BooleanField("new approved reproductions and notes", default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    EVENTS = ("publications", "regressions", "improvements", "evidence", "attestations")

    objects = WatchQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "benchmark"], condition=models.Q(target="benchmark"),
                name="watch_one_per_benchmark",
            ),
            models.UniqueConstraint(
                fields=["user", "source"], condition=models.Q(target="source"),
                name="watch_one_per_source",
            ),
            models.UniqueConstraint(
                fields=["user", "cell_key", "provider_key"], condition=models.Q(target="cell"),
                name="watch_one_per_cell",
            ),
        ]  # fmt: skip
        indexes = [
            # Who watches what a sync touched: by cell (the benchmark and source foreign keys
            # have their own indexes).
            models.Index(fields=["cell_key", "provider_key"], name="watch_cell"),
        ]

    def __str__(self) -> str:
        return f"{self.user} watches {self.label}"

    @property
    def label(self) -> str:
        if self.target == self.Target.BENCHMARK:
            return f"the benchmark {self.benchmark.title}"
        if self.target == self.Target.SOURCE:
            return f"the source {self.source.name}"
        return f"the cell of run {self.run.public_id} ({self.run.title})"

    def page_url(self) -> str:
        if self.target == self.Target.BENCHMARK:
            return self.benchmark.get_absolute_url()
        if self.target == self.Target.SOURCE:
            return reverse("runs:source-changes", args=[self.source.slug])
        return self.run.get_absolute_url() + "#history"

    def feed_url(self) -> str:
        if self.target == self.Target.BENCHMARK:
            return reverse("runs:feed-benchmark-changes", args=[self.benchmark.slug])
        if self.target == self.Target.SOURCE:
            return reverse("runs:feed-source-changes", args=[self.source.slug])
        return reverse("runs:feed-cell-changes", args=[self.run.public_id])


class Notice(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notices",
        db_index=False,
    )  # fmt: skip
    watch = models.ForeignKey(Watch, on_delete=models.SET_NULL, null=True, related_name="+")
    key = models.CharField(max_length=300, help_text="What it is about, once per user")
    batch = models.CharField(max_length=64, help_text="The sync or event that caused it")
    line = models.TextField()
    url = models.CharField(max_length=300)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="notice_once_per_user")]
        indexes = [models.Index(fields=["batch", "user"], name="notice_batch_user")]

    def __str__(self) -> str:
        return f"{self.user}: {self.key}"

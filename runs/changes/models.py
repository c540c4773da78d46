"""What the change rule (runs/changes/detect.py) found, stored per cell so pages read it with
one query: one CellSeries per cell of a source (judged, noisy or too short) and one CellChange
per point the rule flagged. Written only by runs.changes.services.changes_detect, which
recomputes the cells a publication touched and replaces their rows (idempotent).

A cell here is what RunQuerySet.history_of follows: a comparison cell (ComparisonGroup.cell_key)
and a provider, inside one source.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from runs.changes import detect
from runs.changes.querysets import CellChangeQuerySet


def commits_url(repository: str, old: str, new: str) -> str:
    """GitHub's compare page of upstream's commits from `old` to `new`; "" where the source has
    no GitHub repository, a commit is unknown, or both publications are of one commit (a
    release build of the commit before it)."""
    if not (old and new and old != new and repository.startswith("https://github.com/")):
        return ""
    return f"{repository.rstrip('/')}/compare/{old}...{new}"


class CellSeries(models.Model):
    source = models.ForeignKey(
        "runs.Source", on_delete=models.PROTECT, related_name="+", db_index=False
    )
    cell_key = models.CharField(max_length=71)
    provider_key = models.CharField(max_length=64)
    benchmark = models.ForeignKey(
        "runs.Benchmark", on_delete=models.PROTECT, related_name="+", db_index=False
    )
    status = models.CharField(
        max_length=8,
        choices=[(detect.JUDGED, "judged"), (detect.NOISY, "too noisy to judge"),
                 (detect.SHORT, "too few publications")],
    )  # fmt: skip
    points = models.PositiveIntegerField()
    tolerance = models.FloatField(help_text="The cell's tolerance, the rule's floor")
    detected_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "cell_key", "provider_key"], name="cellseries_unique_cell"
            )
        ]
        indexes = [
            # Source page: its cells by status; benchmark page: a benchmark's noisy cells.
            models.Index(fields=["source", "status"], name="cellseries_source_status"),
            models.Index(fields=["benchmark", "status"], name="cellseries_bench_status"),
        ]

    def __str__(self) -> str:
        return f"{self.cell_key[:15]}/{self.provider_key}: {self.status}"


class CellChange(models.Model):
    STEP, TRANSIENT = detect.STEP, detect.TRANSIENT
    OUTLIER, PENDING = detect.OUTLIER, detect.PENDING
    REGRESSION, IMPROVEMENT = detect.REGRESSION, detect.IMPROVEMENT

    source = models.ForeignKey(
        "runs.Source", on_delete=models.PROTECT, related_name="+", db_index=False
    )
    # The publication at which the median moved, and the cell's one before it.
    publication = models.ForeignKey(
        "runs.Publication", on_delete=models.PROTECT, related_name="+", db_index=False
    )
    previous = models.ForeignKey(
        "runs.Publication", on_delete=models.PROTECT, related_name="+", db_index=False
    )
    cell_key = models.CharField(max_length=71)
    provider_key = models.CharField(max_length=64)
    benchmark = models.ForeignKey(
        "runs.Benchmark", on_delete=models.PROTECT, related_name="+", db_index=False
    )
    run = models.ForeignKey("runs.Run", on_delete=models.PROTECT, related_name="+", db_index=False)
    kind = models.CharField(
        max_length=9,
        choices=[(STEP, "step"), (TRANSIENT, "transient, back within a few publications"),
                 (OUTLIER, "outlier, reverted at the next publication"),
                 (PENDING, "pending the next publication")],
    )  # fmt: skip
    direction = models.CharField(
        max_length=12, choices=[(REGRESSION, "regression"), (IMPROVEMENT, "improvement")]
    )
    # A transient's last publication off the old level (the span runs from `publication`).
    until = models.ForeignKey(
        "runs.Publication", on_delete=models.PROTECT, related_name="+", db_index=False,
        null=True, blank=True,
    )  # fmt: skip
    before = models.FloatField(help_text="Baseline median, in the run's unit")
    after = models.FloatField(help_text="Median of the new level, in the run's unit")
    threshold = models.FloatField(help_text="Relative threshold the move exceeded")
    # Moved the same way at the same publication as many cells of several kernels.
    grouped = models.BooleanField(default=False)
    # Of a grouped change: the median move of every cell of its group's kernels between the
    # group's publication and the one most of its cells moved from, beyond the threshold or
    # not, and how many cells that is (how far the suite moved, not only the cells picked
    # for moving far). Set with `grouped` by changes_detect.
    group_shift = models.FloatField(null=True, blank=True)
    group_cells = models.PositiveIntegerField(default=0)
    # A maintainer's word on this point (ChangeReview.state, "" if none), copied from the
    # review by changes_detect and by changes_review, so a feed leaves out the dismissed on
    # its own index.
    review = models.CharField(max_length=12, blank=True, default="")
    # The publication's upstream time (Publication.published_at), copied so each feed's
    # filter and its order are one index: entries are dated by upstream, and a re-detection,
    # which replaces the rows, dates and orders them as before.
    published_at = models.DateTimeField(null=True, blank=True)
    detected_at = models.DateTimeField(auto_now=True)

    objects = CellChangeQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["source", "cell_key", "provider_key", "publication"],
                name="cellchange_unique_point",
            )
        ]
        indexes = [
            # Source changes page and API `source`: a source's changes by publication (its
            # publications with a change, one probe each).
            models.Index(fields=["source", "publication", "kind"], name="cellchange_source_pub"),
            # The changes page's counts, from the index alone.
            models.Index(
                fields=["source", "kind", "direction", "grouped"], name="cellchange_source_kinds"
            ),
            # API `publication`, grouping after detection, a changes page's lists.
            models.Index(fields=["publication", "kind", "direction"], name="cellchange_pub_kind"),
            # Benchmark page and API `benchmark`; its feed, newest publication first.
            models.Index(
                fields=["benchmark", "kind", "published_at", "id"], name="cellchange_bench_time"
            ),
            # The source's feed, newest publication first.
            models.Index(
                fields=["source", "kind", "published_at", "id"], name="cellchange_source_time"
            ),
            # The API unfiltered, newest publication first.
            models.Index(fields=["published_at", "id"], name="cellchange_time"),
            # A cell's feed (every source).
            models.Index(fields=["cell_key", "provider_key"], name="cellchange_cell"),
            # API `kind`, `direction` and `grouped` when no source, benchmark or publication
            # narrows them first.
            models.Index(fields=["kind", "direction"], name="cellchange_kind_dir"),
            models.Index(fields=["direction", "grouped"], name="cellchange_dir_grouped"),
            models.Index(fields=["grouped", "kind"], name="cellchange_grouped_kind"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.direction} of {self.cell_key[:15]}/{self.provider_key}"

    @property
    def commits_url(self) -> str:
        """Upstream's commits from the cell's previous publication to this one (reads source,
        previous and publication: with_related)."""
        return commits_url(
            self.source.harness_repository,
            self.previous.upstream_commit,
            self.publication.upstream_commit,
        )

    @property
    def shift(self) -> float:
        return (self.after - self.before) / self.before if self.before else 0.0

    @property
    def shift_text(self) -> str:
        """The move from the baseline as pages print it, like +41 %."""
        return f"{self.shift * 100:+.0f} %"

    @property
    def threshold_text(self) -> str:
        return f"{self.threshold * 100:.0f} %"


class ChangeReview(models.Model):
    """A maintainer's word on a detected change: acknowledged (seen, it stands) or dismissed
    (not a change of the kernel; shown as such, left out of feeds and notices). Keyed on the
    point (source, cell, provider, publication), not on a CellChange row: changes_detect
    replaces those rows, and the review holds for whatever the rule finds there next. Written
    only by runs.changes.services.changes_review; each review is also a moderation event
    (runs.signals.change_reviewed)."""

    ACKNOWLEDGED, DISMISSED = "acknowledged", "dismissed"

    source = models.ForeignKey(
        "runs.Source", on_delete=models.PROTECT, related_name="+", db_index=False
    )
    cell_key = models.CharField(max_length=71)
    provider_key = models.CharField(max_length=64)
    publication = models.ForeignKey(
        "runs.Publication", on_delete=models.PROTECT, related_name="+", db_index=False
    )
    state = models.CharField(
        max_length=12, choices=[(ACKNOWLEDGED, "acknowledged"), (DISMISSED, "dismissed")]
    )
    reason = models.CharField(max_length=500, blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", null=True
    )
    reviewed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "cell_key", "provider_key", "publication"],
                name="changereview_unique_point",
            )
        ]

    def __str__(self) -> str:
        return f"{self.state} {self.cell_key[7:23]}/{self.provider_key} at {self.publication_id}"

"""Atom feeds of detected changes, one per watch target: a source, a benchmark, a cell (named
by one of its runs). A kernel team subscribes to its benchmark's feed; every step (regression
or improvement) and every transient that a maintainer has not dismissed is an entry, newest
publication first, its guid stable across recomputations. A transient is news too: the
benchmark's figures were off for a few publications and came back. An excursion of the host
(transients grouped at one publication) is one entry with its size and span, not one per
cell, so it cannot push the kernels' own steps out of the feed."""

from __future__ import annotations

from django.contrib.syndication.views import Feed
from django.db.models import Count, F, Q, Window
from django.db.models.functions import RowNumber
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.feedgenerator import Atom1Feed

from kilib.origin import site_root
from runs.changes.models import CellChange
from runs.changes.pages import shown
from runs.models import Benchmark, Run, Source
from runs.pages.units import scale
from runs.read.freshness import DATA, cached

ENTRIES = 50


class HostExcursion:
    """The transients grouped at one publication in one direction, as one feed entry: its
    first row, with the group's size (`_cells`)."""

    def __init__(self, row: CellChange):
        self.row, self.source, self.publication = row, row.source, row.publication
        self.direction, self.published_at, self.cells = row.direction, row.published_at, row._cells


class _ChangesFeed(Feed):
    feed_type = Atom1Feed

    def __call__(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        # The document reads the run data only (changes and their reviews are rows of runs):
        # kept under its version, per feed and object. An unknown slug or run raises its 404
        # before anything is kept.
        name = f"changes-feed:{type(self).__name__}:{'/'.join(map(str, kwargs.values()))}"
        content, content_type = cached(
            name, [DATA], lambda: self._document(request, *args, **kwargs)
        )
        return HttpResponse(content, content_type=content_type)

    def _document(self, request: HttpRequest, *args, **kwargs) -> tuple[bytes, str]:
        response = super().__call__(request, *args, **kwargs)
        return response.content, response["Content-Type"]

    def changes(self, obj):
        raise NotImplementedError

    def items(self, obj):
        """Steps, a kernel's own transients and the host's excursions, in one read of the
        feed's index (two queries: the changes, then their runs). Of the transients grouped
        at one publication in one direction, the first row stands for the group and carries
        its size and its span's end."""
        group = [F("publication_id"), F("direction")]
        changes = (
            self.changes(obj)
            .exclude(review="dismissed")
            .filter(Q(kind=CellChange.STEP) | Q(kind=CellChange.TRANSIENT))
            .annotate(
                _first=Window(
                    RowNumber(),
                    partition_by=[*group, F("kind"), F("grouped")],
                    order_by=F("id").asc(),
                ),
                _cells=Window(Count("id"), partition_by=[*group, F("kind"), F("grouped")]),
            )
            .filter(Q(kind=CellChange.STEP) | Q(grouped=False) | Q(_first=1))
            .newest_first()
        )
        return [
            HostExcursion(c) if c.kind == CellChange.TRANSIENT and c.grouped else c
            for c in shown(changes)[:ENTRIES]
        ]

    def item_link(self, item: CellChange | HostExcursion) -> str:
        if isinstance(item, HostExcursion):
            return site_root() + reverse("runs:source-changes", args=[item.source.slug])
        return f"{site_root()}{item.run.get_absolute_url()}#history"

    def item_title(self, item: CellChange | HostExcursion) -> str:
        if isinstance(item, HostExcursion):
            return (
                f"Excursion of the benchmark host at {item.publication.slug}, back after "
                f"{item.row.until.slug}: {item.cells} cells "
                f"{'slower' if item.direction == CellChange.REGRESSION else 'faster'}"
            )
        run = item.run
        if item.kind == CellChange.TRANSIENT:
            return (
                f"Transient {item.direction} {item.shift_text} at {item.publication.slug}, back "
                f"after {item.until.slug}: {item.benchmark.title} · "
                f"{run.implementation.display_name} · {run.timed_pass} · {run.metric} on "
                f"{run.environment.gpu.product}"
            )
        return (
            f"{item.direction.capitalize()} {item.shift_text} at {item.publication.slug}: "
            f"{item.benchmark.title} · {run.implementation.display_name} · {run.timed_pass} · "
            f"{run.metric} on {run.environment.gpu.product}"
        )

    def item_description(self, item: CellChange | HostExcursion) -> str:
        if isinstance(item, HostExcursion):
            return (
                f"{item.cells} cells of several kernels moved together at "
                f"{item.publication.slug} (after {item.row.previous.slug}) and came back within "
                f"a few publications (the first of them after {item.row.until.slug}; each "
                f"cell's span is on the changes page): likely the benchmark host (a runner, "
                f"driver or library change upstream), not the kernels, and not a lasting step."
            )
        unit = item.run.unit
        commits = f" Upstream's commits: {item.commits_url}" if item.commits_url else ""
        host = (
            " It moved together with many cells of several kernels at that publication: "
            "likely the benchmark host, not the kernel."
            if item.grouped
            else ""
        )
        held = (
            f"came back after {item.until.slug}: an excursion, not a lasting step"
            if item.kind == CellChange.TRANSIENT
            else "stayed there at the next publication"
        )
        return (
            f"{item.run.workload.label}: the median went from {scale(item.before, unit)} to "
            f"{scale(item.after, unit)} between {item.previous.slug} and "
            f"{item.publication.slug}, beyond the threshold of {item.threshold_text}, and "
            f"{held}.{host}{commits}"
        )

    def item_guid(self, item: CellChange | HostExcursion) -> str:
        # Detection replaces rows; the point itself is what identifies an entry (a step that
        # later turns transient is the same entry, updated).
        if isinstance(item, HostExcursion):
            return (
                f"{site_root()}/changes/{item.source.slug}/host/{item.publication.slug}/"
                f"{item.direction}"
            )
        return (
            f"{site_root()}/changes/{item.source.slug}/{item.cell_key[7:23]}/"
            f"{item.provider_key}/{item.publication.slug}/{item.direction}"
        )

    item_guid_is_permalink = False

    # Dated by the publication (upstream's time), never by the detection: a re-detection
    # replaces the rows and must not re-date or reorder the entries.
    def item_pubdate(self, item: CellChange):
        return item.published_at

    def item_updateddate(self, item: CellChange):
        return item.published_at

    def item_author_name(self, item: CellChange) -> str:
        return item.source.name


class SourceChangesFeed(_ChangesFeed):
    def get_object(self, request, slug: str) -> Source:
        return get_object_or_404(Source, slug=slug)

    def title(self, obj: Source) -> str:
        return f"KernelIndex: changes detected in {obj.name}"

    def link(self, obj: Source) -> str:
        return site_root() + reverse("runs:source-changes", args=[obj.slug])

    def feed_url(self, obj: Source) -> str:
        return site_root() + reverse("runs:feed-source-changes", args=[obj.slug])

    def changes(self, obj: Source):
        return CellChange.objects.of_source(obj)


class BenchmarkChangesFeed(_ChangesFeed):
    def get_object(self, request, slug: str) -> Benchmark:
        return get_object_or_404(Benchmark, slug=slug)

    def title(self, obj: Benchmark) -> str:
        return f"KernelIndex: changes detected in {obj.title}"

    def link(self, obj: Benchmark) -> str:
        return site_root() + obj.get_absolute_url()

    def feed_url(self, obj: Benchmark) -> str:
        return site_root() + reverse("runs:feed-benchmark-changes", args=[obj.slug])

    def changes(self, obj: Benchmark):
        return CellChange.objects.of_benchmark(obj)


class CellChangesFeed(_ChangesFeed):
    def get_object(self, request, public_id: str) -> Run:
        return Run.objects.with_cell().current_or_404(public_id)

    def title(self, obj: Run) -> str:
        return f"KernelIndex: changes detected in the cell of run {obj.public_id} ({obj.title})"

    def link(self, obj: Run) -> str:
        return f"{site_root()}{obj.get_absolute_url()}#history"

    def feed_url(self, obj: Run) -> str:
        return site_root() + reverse("runs:feed-cell-changes", args=[obj.public_id])

    def changes(self, obj: Run):
        return CellChange.objects.of_run_cell(obj)

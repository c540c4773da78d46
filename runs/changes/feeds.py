"""Atom feeds of detected changes, one per watch target: a source, a benchmark, a cell (named
by one of its runs). A kernel team subscribes to its benchmark's feed; every step (regression
or improvement) and every transient that a maintainer has not dismissed is an entry, newest
publication first, its guid stable across recomputations. A transient is news too: the
benchmark's figures were off for a few publications and came back. An excursion of the host
(transients grouped at one publication) is one entry with its size and span, not one per
cell, so it cannot push the kernels' own steps out of the feed."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from django.contrib.syndication.views import Feed
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.feedgenerator import Atom1Feed

from kilib.origin import site_root
from runs.changes.models import CellChange
from runs.changes.pages import shown
from runs.models import Benchmark, Publication, Run, Source
from runs.pages.units import scale
from runs.read.freshness import DATA, kept

ENTRIES = 50


@dataclass
class HostExcursion:
    """The transients grouped at one publication in one direction, as one feed entry."""

    source: Source
    publication: object
    direction: str
    published_at: datetime
    cells: int
    kernels: int
    ends: list  # [(slug of the last publication off the level, cells)], most cells first


def _newest_first(entry) -> tuple[float, int]:
    """The feeds' order over steps, transients and host excursions together: upstream's time,
    then the newest row (QuerySet.newest_first)."""
    when = entry.published_at.timestamp() if entry.published_at else float("-inf")
    return when, getattr(entry, "id", 0)


class _ChangesFeed(Feed):
    feed_type = Atom1Feed

    def __call__(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        # The document reads the run data only (changes and their reviews are rows of runs):
        # kept under its version, per feed and object. An unknown slug or run raises its 404
        # before anything is kept.
        name = f"changes-feed:{type(self).__name__}:{'/'.join(map(str, kwargs.values()))}"
        content, content_type = kept(name, [DATA], lambda: self._document(request, *args, **kwargs))
        return HttpResponse(content, content_type=content_type)

    def _document(self, request: HttpRequest, *args, **kwargs) -> tuple[bytes, str]:
        response = super().__call__(request, *args, **kwargs)
        return response.content, response["Content-Type"]

    def changes(self, obj):
        raise NotImplementedError

    def items(self, obj):
        changes = self.changes(obj)
        steps = list(shown(changes.alarmed().newest_first())[:ENTRIES])
        transients = changes.filter(kind=CellChange.TRANSIENT).exclude(review="dismissed")
        alone = list(shown(transients.filter(grouped=False).newest_first())[:ENTRIES])
        entries = steps + alone + self._host_excursions(transients.filter(grouped=True))
        entries.sort(key=_newest_first, reverse=True)
        return entries[:ENTRIES]

    def _host_excursions(self, grouped) -> list[HostExcursion]:
        """The newest groups of transients, one entry each: two aggregate queries and one for
        their publications and sources."""
        rows = list(
            grouped.values("publication_id", "direction", "published_at", "source_id")
            .annotate(cells=Count("id"), kernels=Count("benchmark_id", distinct=True))
            .order_by("-published_at", "publication_id", "direction")[:ENTRIES]
        )
        if not rows:
            return []
        ends: dict[tuple, Counter] = {}
        for pub, direction, until, n in (
            grouped.filter(publication_id__in={r["publication_id"] for r in rows})
            .values_list("publication_id", "direction", "until__slug")
            .annotate(n=Count("id"))
            .order_by()
        ):
            ends.setdefault((pub, direction), Counter())[until] += n
        publications = Publication.objects.in_bulk({r["publication_id"] for r in rows})
        sources = Source.objects.in_bulk({r["source_id"] for r in rows})
        return [
            HostExcursion(
                source=sources[r["source_id"]],
                publication=publications[r["publication_id"]],
                direction=r["direction"],
                published_at=r["published_at"],
                cells=r["cells"],
                kernels=r["kernels"],
                ends=ends.get((r["publication_id"], r["direction"]), Counter()).most_common(),
            )  # fmt: skip
            for r in rows
        ]

    def item_link(self, item: CellChange | HostExcursion) -> str:
        if isinstance(item, HostExcursion):
            return site_root() + reverse("runs:source-changes", args=[item.source.slug])
        return f"{site_root()}{item.run.get_absolute_url()}#history"

    def item_title(self, item: CellChange | HostExcursion) -> str:
        if isinstance(item, HostExcursion):
            return (
                f"Excursion of the benchmark host at {item.publication.slug}, back after "
                f"{item.ends[0][0]}: {item.cells} cells of {item.kernels} kernels "
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
            spans = ", ".join(f"{slug} ({n} cells)" for slug, n in item.ends)
            return (
                f"{item.cells} cells of {item.kernels} kernels moved together at "
                f"{item.publication.slug} and came back within a few publications: the last "
                f"publication off their level was {spans}. Likely the benchmark host (a runner, "
                f"driver or library change upstream), not the kernels; not a lasting step."
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

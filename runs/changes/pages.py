"""What the source's changes page, the benchmark page and the feeds show of the detected
changes: per publication, ungrouped regressions first, then improvements, then each group as
one line ("N cells of K kernels moved together"), then the outliers and pending points
counted. A fixed number of queries per page of publications."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Count

from runs.changes.models import CellChange, CellSeries
from runs.models import Publication, Source

PUBLICATIONS_PER_PAGE = 8
# Cells listed inside one group's fold; the rest are counted.
GROUP_LISTED = 50


@dataclass
class Group:
    kind: str
    direction: str
    changes: list = field(default_factory=list)

    @property
    def kernels(self) -> int:
        return len({c.benchmark_id for c in self.changes})

    @property
    def median_shift_text(self) -> str:
        shifts = sorted(c.shift for c in self.changes)
        return f"{shifts[len(shifts) // 2] * 100:+.0f} %"


@dataclass
class PublicationChanges:
    publication: Publication
    previous_slug: str = ""  # the cell's publication before this one
    regressions: list = field(default_factory=list)
    improvements: list = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    outliers: int = 0
    pending: list = field(default_factory=list)


def source_publications_with_changes(source: Source):
    """The source's publications that have a detected change, newest first (a QuerySet to
    page through)."""
    ids = CellChange.objects.filter(source=source).values("publication_id")
    return Publication.objects.filter(id__in=ids).order_by("-sequence", "-id")


def publications_changes(publications: list[Publication]) -> list[PublicationChanges]:
    """Each publication's changes, laid out as the page lists them."""
    by_pub = {p.pk: PublicationChanges(p) for p in publications}
    rows = (
        CellChange.objects.filter(publication_id__in=by_pub)
        .exclude(kind=CellChange.OUTLIER)
        .with_related()
        .regressions_first()
    )
    groups: dict[tuple, Group] = {}
    for c in rows:
        entry = by_pub[c.publication_id]
        entry.previous_slug = entry.previous_slug or c.previous.slug
        if c.kind == CellChange.PENDING and not c.grouped:
            entry.pending.append(c)
        elif c.grouped:
            key = (c.publication_id, c.kind, c.direction)
            if key not in groups:
                groups[key] = Group(c.kind, c.direction)
                entry.groups.append(groups[key])
            groups[key].changes.append(c)
        elif c.direction == CellChange.REGRESSION:
            entry.regressions.append(c)
        else:
            entry.improvements.append(c)
    outliers = (
        CellChange.objects.filter(publication_id__in=by_pub, kind=CellChange.OUTLIER)
        .values_list("publication_id", "previous__slug")
        .annotate(n=Count("id"))
        .order_by()
    )
    for pub, previous, n in outliers:
        by_pub[pub].outliers += n
        by_pub[pub].previous_slug = by_pub[pub].previous_slug or previous
    return [by_pub[p.pk] for p in publications]


def source_summary(source: Source) -> dict:
    """Counts for the head of the page: cells by status, changes by kind and direction."""
    status = dict(
        CellSeries.objects.filter(source=source)
        .values_list("status")
        .annotate(n=Count("id"))
        .order_by()
    )
    kinds: dict = defaultdict(int)
    rows = (
        CellChange.objects.filter(source=source)
        .values_list("kind", "direction", "grouped")
        .annotate(n=Count("id"))
        .order_by()
    )
    for kind, direction, grouped, n in rows:
        kinds[f"{kind}_{direction}"] += n
        kinds[kind] += n
        if grouped and kind == CellChange.STEP:
            kinds["step_grouped"] += n
    return {"status": status, "kinds": dict(kinds)}

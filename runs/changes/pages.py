"""What the source's changes page, the benchmark page and the feeds show of the detected
changes: per publication, ungrouped regressions first, then improvements, then each group as
one line ("N cells of K kernels moved together"), then the outliers and pending points
counted. A fixed number of queries per page of publications, and rows read only for what it
lists: each list of a publication (its regressions, its improvements, each group, its pending
points) shows at most LISTED changes and counts the rest."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    JSONField,
    Min,
    OuterRef,
    Prefetch,
    Q,
    Value,
    When,
    Window,
)
from django.db.models.functions import Abs, RowNumber
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from runs.changes.models import CellChange, CellSeries
from runs.models import Publication, Run, Source

PUBLICATIONS_PER_PAGE = 8
# Changes listed in each list of a publication; the rest are counted.
LISTED = 50


@dataclass
class Group:
    kind: str
    direction: str
    cells: int = 0
    kernels: int = 0
    changes: list = field(default_factory=list)  # the LISTED largest moves
    median_shift: float = 0.0  # of the group's cells, those beyond their thresholds
    # Of every cell of the group's kernels at the publication, beyond its threshold or not
    # (how far the suite moved, not only the cells picked for moving far), and how many.
    all_shift: float | None = None
    all_cells: int = 0
    # A transient group's ends: (last publication off the level, cells), most cells first.
    untils: list[tuple[str, int]] = field(default_factory=list)

    @property
    def more(self) -> int:
        return self.cells - len(self.changes)

    @property
    def median_shift_text(self) -> str:
        return f"{self.median_shift * 100:+.0f} %"

    @property
    def all_shift_text(self) -> str:
        return f"{self.all_shift * 100:+.1f} %" if self.all_shift is not None else ""


@dataclass
class PublicationChanges:
    publication: Publication
    previous_slug: str = ""  # the cell's publication before this one
    commits_url: str = ""  # upstream's commits from that one to this one
    regressions: list = field(default_factory=list)
    improvements: list = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    outliers: int = 0
    pending: list = field(default_factory=list)
    # How many each list has, listed or not.
    regressions_count: int = 0
    improvements_count: int = 0
    pending_count: int = 0

    @property
    def regressions_more(self) -> int:
        return self.regressions_count - len(self.regressions)

    @property
    def improvements_more(self) -> int:
        return self.improvements_count - len(self.improvements)

    @property
    def pending_more(self) -> int:
        return self.pending_count - len(self.pending)


def _json_paths(model, related: dict, prefix: str = "") -> list[str]:
    """The JSON columns of the models a select_related tree reaches."""
    paths = []
    for name, below in related.items():
        target = model._meta.get_field(name).related_model
        paths += [
            f"{prefix}{name}__{f.name}"
            for f in target._meta.concrete_fields
            if isinstance(f, JSONField)
        ]
        paths += _json_paths(target, below, f"{prefix}{name}__")
    return paths


def _paths(related: dict, prefix: str = "") -> list[str]:
    """A select_related tree as the paths to its leaves."""
    return [
        path
        for name, below in related.items()
        for path in (_paths(below, f"{prefix}{name}__") if below else [f"{prefix}{name}"])
    ]


def shown(changes):
    """The changes with what a page, the API or a feed shows of them (with_related), without
    the runs' and documents' JSON (metrics, labels, specs): none of them shows it, and
    decoding it cost more than the rest of a row. The runs with their catalogue rows come in
    a second query: one query joining all ten tables took PostgreSQL longer to plan than to
    run, and a page's first reader after a data change paid it."""
    related = dict(changes.with_related().query.select_related)
    run = related.pop("run", {})
    runs = Run.objects.select_related(*_paths(run)).defer(
        *(path.removeprefix("run__") for path in _json_paths(CellChange, {"run": run}))
    )
    return (
        changes.select_related(*_paths(related))
        .defer(*_json_paths(CellChange, related))
        .prefetch_related(Prefetch("run", queryset=runs))
    )


def source_publications_with_changes(source: Source):
    """The source's publications that have a detected change, newest first by upstream's
    time (then upstream's order): the source's publications in order, each asked whether it
    has a change (an index probe), so a page reads as many publications as it shows, not the
    source's history."""
    changed = CellChange.objects.filter(source=source, publication=OuterRef("pk"))
    return (
        Publication.objects.filter(source=source)
        .filter(Exists(changed))
        .order_by("-published_at", "-sequence", "-id")
    )


def _listed(publication_ids) -> tuple[list, set[int], set[int], dict[int, int]]:
    """The changes each list of these publications shows (with what it shows of them), the
    ids of those listed, the ids of each group's median move, and {id: cells} of one change
    per end of a transient group (the cells that came back after its `until`). In each list (a publication's ungrouped regressions, its ungrouped improvements,
    its pending points, each of its groups) the LISTED largest moves. Outliers are only
    counted. The lists are cut from the changes' own rows (one window query, no join), then
    only the rows kept are read with what they show."""
    one_list = [
        "publication_id",
        "grouped",
        "kind",
        # Pending points are one list whatever their direction, unless grouped.
        Case(When(grouped=False, kind=CellChange.PENDING, then=Value("")), default="direction"),
    ]
    shift = (F("after") - F("before")) / F("before")
    cut = (
        CellChange.objects.filter(publication_id__in=publication_ids)
        .exclude(kind=CellChange.OUTLIER)
        .annotate(
            by_size=Window(RowNumber(), partition_by=one_list, order_by=[Abs(shift).desc(), "id"]),
            by_shift=Window(RowNumber(), partition_by=one_list, order_by=[shift.asc(), "id"]),
            cells=Window(Count("id"), partition_by=one_list),
            # A transient group's cells per last publication off the level: one row of each.
            by_end=Window(RowNumber(), partition_by=[*one_list, "until_id"], order_by=["id"]),
            end_cells=Window(Count("id"), partition_by=[*one_list, "until_id"]),
        )
        .filter(
            Q(by_size__lte=LISTED)
            | Q(by_shift=F("cells") / Value(2) + Value(1))
            | Q(grouped=True, kind=CellChange.TRANSIENT, by_end=1)
        )
        .values_list("id", "grouped", "kind", "by_size", "by_shift", "cells", "by_end", "end_cells")
    )
    listed, medians, ends = set(), set(), {}
    for pk, grouped, kind, by_size, by_shift, cells, by_end, end_cells in cut:
        if by_size <= LISTED:
            listed.add(pk)
        if grouped and by_shift == cells // 2 + 1:
            medians.add(pk)
        if grouped and kind == CellChange.TRANSIENT and by_end == 1:
            ends[pk] = end_cells
    rows = shown(CellChange.objects.filter(pk__in=listed | medians | set(ends)))
    return list(rows.regressions_first()), listed, medians, ends


def _sizes(publication_ids) -> list[tuple]:
    """(publication, kind, direction, grouped, cells, kernels, previous slug) for every list
    of these publications, outliers too: counted from the index, no row read per change."""
    return list(
        CellChange.objects.filter(publication_id__in=publication_ids)
        .values_list("publication_id", "kind", "direction", "grouped")
        .annotate(
            cells=Count("id"),
            kernels=Count("benchmark_id", distinct=True),
            previous=Min("previous__slug"),
        )
        .order_by()
    )


def publications_changes(publications: list[Publication]) -> list[PublicationChanges]:
    """Each publication's changes, laid out as the page lists them: two queries for any
    number of publications and changes."""
    by_pub = {p.pk: PublicationChanges(p) for p in publications}
    sizes: dict[tuple, tuple[int, int]] = {}
    for pub, kind, direction, grouped, cells, kernels, previous in _sizes(list(by_pub)):
        entry = by_pub[pub]
        entry.previous_slug = entry.previous_slug or previous
        sizes[(pub, kind, direction, grouped)] = (cells, kernels)
        if kind == CellChange.OUTLIER:
            entry.outliers += cells
        elif kind == CellChange.PENDING and not grouped:
            entry.pending_count += cells
        elif grouped:
            pass  # counted with its group, below
        elif direction == CellChange.REGRESSION:
            entry.regressions_count += cells
        else:
            entry.improvements_count += cells
    groups: dict[tuple, Group] = {}
    seen: set[int] = set()
    rows, listed, medians, ends_of = _listed(list(by_pub))
    ends: dict[tuple, dict[str, int]] = defaultdict(dict)
    for c in rows:
        entry = by_pub[c.publication_id]
        if c.publication_id not in seen:  # the first listed change names the one before
            seen.add(c.publication_id)
            entry.previous_slug = c.previous.slug
            entry.commits_url = c.commits_url
        if c.grouped:
            key = (c.publication_id, c.kind, c.direction)
            if key not in groups:
                cells, kernels = sizes.get((*key, True), (0, 0))
                groups[key] = Group(c.kind, c.direction, cells, kernels)
                entry.groups.append(groups[key])
            if c.pk in medians:
                groups[key].median_shift = c.shift
            if c.pk in ends_of:
                ends[key][c.until.slug] = ends_of[c.pk]
            if c.group_shift is not None:
                groups[key].all_shift, groups[key].all_cells = c.group_shift, c.group_cells
            listing = groups[key].changes
        elif c.kind == CellChange.PENDING:
            listing = entry.pending
        elif c.direction == CellChange.REGRESSION:
            listing = entry.regressions
        else:
            listing = entry.improvements
        if c.pk in listed:
            listing.append(c)
    for key, counted in ends.items():
        if key in groups:
            groups[key].untils = sorted(counted.items(), key=lambda e: (-e[1], e[0]))
    return [by_pub[p.pk] for p in publications]


def rendered_sections(publications: list[Publication]) -> list[SafeString]:
    """Each publication's section of the changes page, rendered."""
    return [
        mark_safe(render_to_string("runs/_changes_section.html", {"s": s}))
        for s in publications_changes(publications)
    ]


def source_summary(source: Source) -> dict:
    """Counts for the head of the page: cells by status, changes by kind and direction, and
    the publications with a change (for the pager). Counted on the indexes of CellSeries and
    CellChange (source first), no row read."""
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
    publications = (
        CellChange.objects.filter(source=source).values("publication_id").distinct().count()
    )
    return {"status": status, "kinds": dict(kinds), "publications": publications}

"""The sections of a run page beside the run itself: its catalogue rows, the cell's history around
this run (and its chart), the leader of its group, its evidence verdict and the canonical
manifest. Computed, they are a few queries on indexes (the history reads a window around the
run, not the whole cell); they read the run data only, so they are kept under its version
(runs.read.freshness.kept) and a write about this or any run (an attestation, a job) leaves
them kept.
"""

from __future__ import annotations

import json
from collections import Counter

from django.db import connection
from django.db.models import Count, Q, Value

from runs.changes.models import CellChange, CellSeries
from runs.claims import read as claims
from runs.evidence import tolerance_for
from runs.manifest.canonical import run_manifest
from runs.models import Evidence, EvidenceEvent, Run
from runs.pages import charts, history_chart
from runs.read import catalogue
from runs.read.freshness import DATA, kept

# Points of the cell's history shown on the run page: the run and its neighbours, up to this
# many in all; the history page (/runs/<id>/history/) pages through every one.
HISTORY_SHOWN = 24


def parts(run: Run, verdict) -> dict:
    """The page's parts that read the run data only, kept under its version; the run gets its
    catalogue rows from them. `verdict(run)` is the evidence event behind the level."""

    def compute() -> dict:
        catalogue.attach([run])
        leader = Run.objects.leader_of(run)
        return {
            "catalogue": {name: getattr(run, name) for name in (*catalogue.ATTACHED, "source")},
            "history": history(run),
            "leader": leader,
            # The claim judged between this run and its leader: from the group's claims.
            "leader_claim": claims.pair_in_group(run.group_id, run.public_id, leader)
            if leader
            else None,
            "verdict": verdict(run),
            "manifest_json": manifest_json(run),
        }

    kept_parts = kept(f"run-sections:{run.pk}", [DATA], compute)
    for name, row in kept_parts["catalogue"].items():
        setattr(run, name, row)
    return kept_parts


def history(run: Run) -> dict:
    """Up to HISTORY_SHOWN points of the cell's history around this run, oldest first, how
    many there are in all and from which sources, their chart, and the changes detected
    among them (runs/changes/)."""
    return _history(run)


def _history(run: Run) -> dict:
    cell = Run.objects.history_of(run)
    before, after = _sides(run, cell)
    n_after = min(len(after), HISTORY_SHOWN - min(len(before), HISTORY_SHOWN // 2))
    points = before[: HISTORY_SHOWN - n_after][::-1] + after[:n_after]
    # Publications per source, so the heading and the counts name what the points are: from
    # the points themselves unless the window is full and there may be more.
    if len(points) < HISTORY_SHOWN:
        sources = sorted(Counter((p["source__name"], p["source__slug"]) for p in points).items())
        sources = [(name, slug, n) for (name, slug), n in sources]
    else:
        sources = list(
            cell.order_by("source__name").values_list("source__name", "source__slug")
            .annotate(n=Count("id"))
        )  # fmt: skip
    total = sum(n for _, _, n in sources)
    part = {"points": points, "total": total, "sources": sources, "svg": "", "changes": [],
            "heading": "History of this cell"}  # fmt: skip
    if total > 1:
        part["heading"] += f" across {total} publications of " + ", ".join(
            f"{name} ({n})" if len(sources) > 1 else name for name, _, n in sources
        )
    if len(points) > 1:
        part.update(_judged(run, points))
    return part


FIELDS = ("pk", "public_id", "median", "observed_at", "publication__slug", "publication_id",
          "publication__sequence", "source_id", "source__name", "source__slug")  # fmt: skip


def _sides(run: Run, cell) -> tuple[list[dict], list[dict]]:
    """Up to a window's worth of points on each side of the run, nearest first: one query where
    the database takes a LIMIT inside a UNION (PostgreSQL), two elsewhere (SQLite)."""
    at = run.observed_at
    earlier = Q(observed_at__lt=at) | Q(
        observed_at=at, publication__sequence__lt=run.publication.sequence
    )
    # The bounds on the time beside `earlier` are what it implies, spelled out as a range of
    # the run_history index: each side reads its window from the run outwards, no further.
    before = (cell.filter(earlier, observed_at__lte=at)
              .order_by("-observed_at", "-publication__sequence")
              .annotate(side=Value(0)).values(*FIELDS, "side")[:HISTORY_SHOWN])  # fmt: skip
    after = (cell.filter(observed_at__gte=at).exclude(earlier)
             .annotate(side=Value(1)).values(*FIELDS, "side")[:HISTORY_SHOWN])  # fmt: skip
    if not connection.features.supports_slicing_ordering_in_compound:
        return list(before), list(after)
    rows = before.union(after, all=True)
    rows = sorted(rows, key=lambda p: (p["observed_at"], p["publication__sequence"]))
    return [p for p in rows if p["side"] == 0][::-1], [p for p in rows if p["side"] == 1]


def _judged(run: Run, points: list[dict]) -> dict:
    """The cell's detected changes among the points shown, its status under the rule, and
    the chart that draws them with the tolerance band and a controlled rerun's median."""
    key = {"source_ids": {p["source_id"] for p in points}, "cell_key": run.group.cell_key,
           "provider_key": run.implementation.provider_key}  # fmt: skip
    at = {p["publication_id"]: i for i, p in enumerate(points)}
    changes = list(
        CellChange.objects.of_cell(**key)
        .filter(publication_id__in=at)
        .select_related("publication", "previous")
    )
    # The groups of changes at the publications where this cell changed; none for a cell that
    # did not (most of them), so no query.
    changed_at = sorted({c.publication_id for c in changes})
    sizes = CellChange.objects.group_sizes(changed_at) if changed_at else {}
    for c in changes:
        c.together = sizes.get((c.publication_id, c.kind, c.direction))
    series = CellSeries.objects.of_cell(**key).values_list("status", flat=True).first()
    tolerance = tolerance_for(run)
    rerun = _rerun(run)
    factor, unit_name = charts.unit_scale(run.unit, [p["median"] for p in points])
    svg = history_chart.history_chart(
        chart_id="history",
        title=f"{run.get_metric_display()} median of this cell in {len(points)} publications, "
        "oldest first",
        points=[(p["publication__slug"], p["median"]) for p in points],
        current=next((i for i, p in enumerate(points) if p["pk"] == run.pk), None),
        y_scale=factor,
        y_unit=unit_name,
        y_label=f"{run.get_metric_display()} median",
        tolerance=tolerance.value,
        marks=[
            history_chart.Mark(at[c.publication_id], c.kind, c.direction, c.shift) for c in changes
        ],
        rerun=rerun,
    )
    return {"svg": svg, "changes": changes, "status": series, "tolerance": tolerance,
            "rerun": rerun}  # fmt: skip


def _rerun(run: Run) -> history_chart.Rerun | None:
    """The newest controlled rerun's median of this run, for the chart (another mark)."""
    if run.evidence == Evidence.REPORTED and run.revision == 1:
        return None  # every rerun's evidence event moves the level: this run has had none
    row = (
        EvidenceEvent.objects.filter(run__public_id=run.public_id, controlled_run__isnull=False)
        .order_by("-created_at", "-id")
        .values_list("controlled_run__median", "controlled_run__environment__gpu__upstream_name")
        .first()
    )
    if row is None:
        return None
    return history_chart.Rerun(float(row[0]), f"controlled rerun on {row[1]}")


def manifest_json(run: Run) -> str:
    """The manifest as the page shows it."""
    return json.dumps(run_manifest(run), indent=2, ensure_ascii=False)

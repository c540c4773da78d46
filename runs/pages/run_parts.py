"""The parts of a run page that stay the same until the data changes: the cell's history
around this run (and its chart) and the canonical manifest. Each is computed on first use
after a data change and then read from the shared cache under the data fingerprint, so a run
page costs the same whether its cell has 3 publications or 3,000.
"""

from __future__ import annotations

import json

from django.db.models import Q

from runs.manifest.canonical import run_manifest
from runs.models import Run
from runs.pages import charts
from runs.read.freshness import cached_per_data_change

# Points of the cell's history shown on the run page: the run and its neighbours, up to this
# many in all; the history page (/runs/<id>/history/) pages through every one.
HISTORY_SHOWN = 24


def history(run: Run) -> dict:
    """{"points": [...], "total": n, "svg": "..."}: up to HISTORY_SHOWN points of the cell's
    history around this run, oldest first, how many there are in all, and their chart."""
    return cached_per_data_change(f"run-history:{run.pk}", lambda: _history(run))


def _history(run: Run) -> dict:
    cell = Run.objects.history_of(run)
    fields = ("pk", "public_id", "median", "observed_at", "publication__slug")
    earlier = Q(observed_at__lt=run.observed_at) | Q(
        observed_at=run.observed_at, publication__sequence__lt=run.publication.sequence
    )
    # Up to a window's worth on each side, then the window: half before this run, the rest
    # after it, either side filling in what the other lacks.
    before = list(cell.filter(earlier).order_by("-observed_at", "-publication__sequence")
                  .values(*fields)[:HISTORY_SHOWN])  # fmt: skip
    after = list(cell.exclude(earlier).values(*fields)[:HISTORY_SHOWN])
    n_after = min(len(after), HISTORY_SHOWN - min(len(before), HISTORY_SHOWN // 2))
    points = before[: HISTORY_SHOWN - n_after][::-1] + after[:n_after]
    total = cell.count() if len(points) == HISTORY_SHOWN else len(points)
    svg = ""
    if len(points) > 1:
        factor, unit_name = charts.unit_scale(run.unit, [p["median"] for p in points])
        shown = f"{len(points)} of {total}" if total > len(points) else f"{total}"
        svg = charts.sparkline(
            chart_id="history",
            title=f"Median of this cell in {shown} upstream runs, oldest first",
            points=[(p["publication__slug"], p["median"]) for p in points],
            y_scale=factor,
            y_unit=unit_name,
            current=next((i for i, p in enumerate(points) if p["pk"] == run.pk), None),
        )
    return {"points": points, "total": total, "svg": svg}


def manifest_json(run: Run) -> str:
    """The manifest as the page shows it. A run row's documents never change in place (a
    changed upstream row is a new revision), so the fingerprint is only there for safety."""
    return cached_per_data_change(
        f"run-manifest:{run.pk}:{run.digest}",
        lambda: json.dumps(run_manifest(run), indent=2, ensure_ascii=False),
    )

"""The benchmark page's list of detected changes, as an include of its own
(runs/templates/runs/_benchmark_changes.html), so the page needs one line to show it."""

from __future__ import annotations

from django import template

from runs.changes.models import CellChange
from runs.models import Benchmark

register = template.Library()

SHOWN = 20


@register.inclusion_tag("runs/_benchmark_changes.html")
def benchmark_changes(benchmark: Benchmark, query) -> dict:
    """The benchmark's steps, narrowed to the source, GPU, pass and metric the page shows when
    its query names them; ungrouped regressions first. Two queries whatever the data."""
    changes = CellChange.objects.reported().filter(benchmark=benchmark)
    narrowed = {
        "source__slug": query.get("source"),
        "run__environment__gpu__slug": query.get("gpu"),
        "run__timed_pass": query.get("pass"),
        "run__metric": query.get("metric"),
    }
    changes = changes.filter(**{k: v for k, v in narrowed.items() if v})
    return {
        "benchmark": benchmark,
        "changes": list(changes.with_related().regressions_first()[:SHOWN]),
        "total": changes.count(),
        "narrowed": any(narrowed.values()),
    }

"""Counts over all current runs, computed once per data change instead of once per request.

Each count is a scan of every current run (about a second at a million runs), and the
numbers only move when the data does. So they are kept under the data fingerprint
(runs.read.freshness): in the shared cache, where one process's computation serves them all,
and in a per-process copy, so a warm request makes no round trip for them. Any write to a
public table moves the fingerprint (database triggers), so an import, a rerun or a raw SQL
fix all retire the old counts, and nothing that writes has to remember to refresh them.
"""

from __future__ import annotations

from runs.models import ComparisonGroup, ImportRecord, Run
from runs.read.freshness import cached_per_data_change, once_per_data_change


def _kept(name: str, compute):
    """compute() once per data change: from this process's copy, else from the shared cache
    (one process's scan serves them all), else computed here."""
    return once_per_data_change(
        f"{name}-counts", lambda: cached_per_data_change(f"{name}-counts", compute)
    )


def _home() -> dict:
    counts = Run.objects.public().home_counts()
    counts["groups"] = ComparisonGroup.objects.count()
    counts["last_import"] = ImportRecord.objects.last_per_source()
    return counts


def home() -> dict:
    """The home page's counts (Run.objects.home_counts() plus comparison groups and the latest
    import per source) for the data as it is now."""
    return _kept("home", _home)


def gpu_benchmarks(gpu_id: int) -> dict[int, int]:
    """Current runs per benchmark on this GPU (a GPU page's list), once per data change."""
    per_gpu = _kept("gpu", Run.objects.public().count_per_gpu_benchmark)
    return per_gpu.get(gpu_id, {})


def source_stats(source_id: int) -> dict:
    """Runs of a source: current, every revision, and revised ones, once per data change."""
    per_source = _kept("source", Run.objects.count_per_source)
    return per_source.get(source_id, {"current": 0, "total": 0, "revised": 0})

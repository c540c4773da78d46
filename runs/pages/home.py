"""The home page's benchmark list, grouped and in natural order (no queries here)."""

from __future__ import annotations

import re
from dataclasses import dataclass


def natural_key(text: str) -> list:
    """Numbers in text sort as numbers: "2_ReLU" before "26_GELU", "L2" before "L10"."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t.lower()) for t in re.split(r"(\d+)", text)]


@dataclass
class BenchmarkGroup:
    title: str  # the family where titles name one ("KernelBench L1"), else the source's name
    benchmarks: list
    runs: int
    open: bool = False


def benchmark_groups(benchmarks: list, main_source: dict, source_names: dict) -> list:
    """The home page's benchmark list: grouped by each benchmark's main source and, where
    titles read "<family> · <name>" (KernelBench's levels), by family instead; the group with
    the most runs first and open, the others folded; names in natural order."""
    groups: dict[str, BenchmarkGroup] = {}
    for benchmark in benchmarks:
        family, _, name = benchmark.title.rpartition(" · ")
        source = source_names.get(main_source.get(benchmark.pk), "")
        title = family or source
        group = groups.setdefault(title, BenchmarkGroup(title, [], 0))
        benchmark.short_title = name
        group.benchmarks.append(benchmark)
        group.runs += benchmark.n
    for group in groups.values():
        group.benchmarks.sort(key=lambda b: natural_key(b.title))
    ordered = sorted(groups.values(), key=lambda g: (-g.runs, natural_key(g.title)))
    if ordered:
        ordered[0].open = True
    return ordered

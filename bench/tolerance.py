"""How far does the same cell move between upstream CI runs on the same GPU?

Reads every data/liger-ci/<folder>/benchmark.csv with runs.sources.parsers.parse_liger_csv (no
database), groups rows into cells (kernel, timed pass, metric, provider, workload parameters,
GPU), takes each CI run's median of the cell (a cell measured twice in one CI run, by two
sweeps sharing a point, counts once, at the median of the two), and measures every run's
relative deviation from the cell's median across runs:

    deviation = |median_run - median_cell| / median_cell

Only cells seen in at least MIN_RUNS CI runs count. It prints, per metric, the count of cells
and observations and the p50/p90/p95/p99 of the deviation, then the rule it implies:
tolerance = p95 rounded up to the next whole percent.

With --write it also writes the per-cell table that runs/evidence.py reads
(data/tolerance/liger-ci.json): each cell seen in at least CELL_MIN_RUNS CI runs gets its
own tolerance, the p95 of its own deviations rounded up, never below FLOOR; every class
(kernel, provider, GPU, metric) with at least CLASS_MIN_OBS observations gets one from its
cells' pooled deviations, for cells seen too rarely; the global figure per metric is the last
resort. docs/evidence.md explains the rule.

    python bench/tolerance.py [data/liger-ci] [--write data/tolerance/liger-ci.json]
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runs.reference.catalogue import workload_slug  # noqa: E402
from runs.sources.parsers import parse_liger_csv  # noqa: E402

MIN_RUNS = 3
QUANTILES = (50, 90, 95, 99)
# A cell's own p95 needs this many CI runs to mean anything (with 3 runs, one of which is the
# median itself, a p95 is one number); rarer cells borrow their class's.
CELL_MIN_RUNS = 8
CLASS_MIN_OBS = 30
# Cells that never move upstream still move between two hosts with the same GPU product
# (driver, clocks, power limit): a latency tolerance below 5 % would test the host, not the
# published number. Peak memory is deterministic; 1 % covers allocator rounding.
FLOOR = {"latency": 0.05, "memory": 0.01}


def percentile(sorted_values: list[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_values:
        raise ValueError("no values")
    k = (len(sorted_values) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def cell_medians(root: Path) -> dict[tuple, dict[str, float]]:
    """cell -> {ci folder: that run's median of the cell}

    A cell is (kernel, timed pass, metric, provider, workload slug, GPU), the workload slug
    being the one the site gives the same parameters, so runs/evidence.py finds a run's cell
    from its own columns."""
    per_run: dict[tuple, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for csv_path in sorted(root.glob("*/benchmark.csv")):
        folder = csv_path.parent.name
        for row in parse_liger_csv(csv_path.read_bytes(), str(csv_path)):
            cell = (
                row.benchmark,
                row.timed_pass,
                row.metric,
                row.provider,
                workload_slug(row.params),
                row.gpu_name,
            )
            per_run[cell][folder].append(row.median)
    return {
        cell: {folder: statistics.median(values) for folder, values in runs.items()}
        for cell, runs in per_run.items()
    }


def deviations(cells: dict[tuple, dict[str, float]]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for cell, runs in cells.items():
        if len(runs) < MIN_RUNS:
            continue
        metric, gpu = cell[2], cell[5]
        centre = statistics.median(runs.values())
        if centre <= 0:
            continue
        entry = out.setdefault(
            metric, {"cells": 0, "values": [], "gpus": defaultdict(int), "by": defaultdict(list)}
        )
        entry["cells"] += 1
        entry["gpus"][gpu] += 1
        devs = [abs(m - centre) / centre for m in runs.values()]
        entry["values"].extend(devs)
        # Liger's own kernels change between CI commits; the other providers' code does not,
        # so their spread is closer to pure measurement noise.
        family = "liger providers" if cell[3].startswith("liger") else "other providers"
        entry["by"][family].extend(devs)
        entry["by"][gpu].extend(devs)
    return out


def tolerance_from(p95: float) -> float:
    """The rule: p95 rounded up to the next whole percent."""
    return math.ceil(p95 * 100) / 100


def cell_key(cell: tuple) -> str:
    """The table's key of a cell; runs/evidence.py builds the same from a run."""
    return "|".join(str(part) for part in cell)


def class_key(cell: tuple) -> str:
    benchmark, _, metric, provider, _, gpu = cell
    return "|".join((benchmark, provider, gpu, metric))


def _rounded(p95: float, metric: str) -> float:
    return max(FLOOR[metric], tolerance_from(p95))


def tolerance_table(cells: dict[tuple, dict[str, float]]) -> dict:
    """Per-cell, per-class and global tolerances (see the module docstring)."""
    table: dict = {"cells": {}, "classes": {}, "global": {}}
    pooled: dict[str, list[float]] = defaultdict(list)
    by_metric: dict[str, list[float]] = defaultdict(list)
    for cell, runs in sorted(cells.items()):
        metric = cell[2]
        if len(runs) < MIN_RUNS:
            continue
        centre = statistics.median(runs.values())
        if centre <= 0:
            continue
        devs = sorted(abs(m - centre) / centre for m in runs.values())
        pooled[class_key(cell)].extend(devs)
        by_metric[metric].extend(devs)
        if len(runs) >= CELL_MIN_RUNS:
            table["cells"][cell_key(cell)] = [_rounded(percentile(devs, 95), metric), len(runs)]
    for key, devs in sorted(pooled.items()):
        if len(devs) >= CLASS_MIN_OBS:
            metric = key.rsplit("|", 1)[1]
            table["classes"][key] = [_rounded(percentile(sorted(devs), 95), metric), len(devs)]
    for metric, devs in sorted(by_metric.items()):
        table["global"][metric] = [_rounded(percentile(sorted(devs), 95), metric), len(devs)]
    table["rule"] = {
        "cellMinRuns": CELL_MIN_RUNS,
        "classMinObservations": CLASS_MIN_OBS,
        "floor": FLOOR,
        "statistic": "p95 of |run median - cell median| / cell median, rounded up to a whole percent",
    }
    return table


def main(argv: list[str]) -> int:
    argv = list(argv)
    write = None
    if "--write" in argv:
        at = argv.index("--write")
        write = Path(argv[at + 1])
        del argv[at : at + 2]
    root = Path(argv[1]) if len(argv) > 1 else ROOT / "data" / "liger-ci"
    folders = sorted(p.parent.name for p in root.glob("*/benchmark.csv"))
    cells = cell_medians(root)
    stats = deviations(cells)
    shown = root.relative_to(ROOT) if root.is_relative_to(ROOT) else root
    print(f"{len(folders)} CI runs under {shown}")
    print(f"{len(cells)} cells; cells seen in at least {MIN_RUNS} runs are measured")
    print()
    print("relative deviation of a run's median from its cell's median across CI runs")
    header = f"{'metric':8} {'cells':>6} {'obs':>7} " + " ".join(
        f"{'p' + str(q):>7}" for q in QUANTILES
    )
    print(header)
    rules = {}
    for metric in sorted(stats):
        values = sorted(stats[metric]["values"])
        ps = {q: percentile(values, q) for q in QUANTILES}
        print(
            f"{metric:8} {stats[metric]['cells']:>6} {len(values):>7} "
            + " ".join(f"{ps[q] * 100:>6.2f}%" for q in QUANTILES)
        )
        rules[metric] = tolerance_from(ps[95])
        for part, part_values in sorted(stats[metric]["by"].items()):
            part_values = sorted(part_values)
            print(
                f"  {part:30} {len(part_values):>7} "
                + " ".join(f"{percentile(part_values, q) * 100:>6.2f}%" for q in QUANTILES)
            )
    print()
    for metric in sorted(stats):
        gpus = ", ".join(f"{g} ({n} cells)" for g, n in sorted(stats[metric]["gpus"].items()))
        print(f"{metric} cells by GPU: {gpus}")
    print()
    print("rule: tolerance = p95 rounded up to the next whole percent")
    for metric, tol in sorted(rules.items()):
        print(f"  {metric}: {tol * 100:.0f}%")
    table = tolerance_table(cells)
    print()
    print(
        f"per-cell table: {len(table['cells'])} cells with >= {CELL_MIN_RUNS} CI runs, "
        f"{len(table['classes'])} classes with >= {CLASS_MIN_OBS} observations"
    )
    for metric in sorted(stats):
        own = sorted(t for k, (t, _) in table["cells"].items() if k.split("|")[2] == metric)
        if own:
            print(
                f"  {metric} cell tolerances: min {own[0]:.0%}, median "
                f"{statistics.median(own):.0%}, max {own[-1]:.0%}; "
                f"at the floor {sum(t == FLOOR[metric] for t in own)} of {len(own)}"
            )
    h200 = {k: v for k, v in table["classes"].items() if "NVIDIA H200" in k}
    for key, (tol, n) in sorted(h200.items()):
        print(f"  class {key}: {tol:.0%} ({n} observations)")
    if write is not None:
        write.parent.mkdir(parents=True, exist_ok=True)
        write.write_text(json.dumps(table, indent=0, sort_keys=True) + "\n")
        print(f"wrote {write}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""The change rule (runs/changes/detect.py) on the real Liger CI history, without a database:
how many changes it reports, per source and per kernel, how many candidates revert at the next
publication, how many steps later come back, and the largest group of cells that moved together.
docs/changes.md quotes its output.

Cells are the ones the site follows (runs.querysets.RunQuerySet.history_of): kernel, timed pass,
metric, provider, workload, GPU and the sweep the row belongs to; its points in the order the
run page draws them (observed time, then the publication's commits.txt position); a cell
measured twice in one CI run counts once, at the median.

    python bench/changes.py [data/liger-ci]
"""

from __future__ import annotations

import os
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")

import django  # noqa: E402

django.setup()

from runs.changes import detect  # noqa: E402
from runs.evidence import cell_tolerance  # noqa: E402
from runs.reference.catalogue import workload_slug  # noqa: E402
from runs.sources.parsers import parse_liger_csv  # noqa: E402

SOURCE = "liger-kernel-ci"
# A step "comes back" when the median of the next COMEBACK points after it lies within the
# step's threshold of the level it left.
COMEBACK = 3


def ordered_folders(root: Path) -> list[str]:
    folders = sorted(p.parent.name for p in root.glob("*/benchmark.csv"))
    listed = (root / "commits.txt").read_text().split() if (root / "commits.txt").exists() else []
    return [f for f in listed if f in folders] + [f for f in folders if f not in listed]


def histories(root: Path) -> tuple[list[str], dict[tuple, dict[int, float]]]:
    folders = ordered_folders(root)
    per: dict[tuple, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    first_seen: dict[tuple, dict[int, object]] = defaultdict(dict)
    for seq, folder in enumerate(folders):
        for row in parse_liger_csv((root / folder / "benchmark.csv").read_bytes(), folder):
            cell = (row.benchmark, row.timed_pass, row.metric, row.provider,
                    workload_slug(row.params), row.gpu_name, row.sweep_name)  # fmt: skip
            per[cell][seq].append(row.median)
            seen = first_seen[cell].get(seq)
            first_seen[cell][seq] = row.observed_at if seen is None else min(seen, row.observed_at)
    return folders, {
        cell: {
            seq: statistics.median(points[seq])
            for seq in sorted(points, key=lambda q, c=cell: (first_seen[c][q], q))
        }
        for cell, points in per.items()
    }


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else ROOT / "data" / "liger-ci"
    folders, cells = histories(root)
    status = Counter()
    kinds = Counter()
    per_kernel: dict[str, Counter] = defaultdict(Counter)
    at: dict[tuple, list[str]] = defaultdict(list)  # (publication, kind, direction) -> kernels
    moves: dict[tuple, list[tuple[str, float]]] = defaultdict(list)  # ... -> (provider, shift)
    comebacks = 0
    points = 0
    for cell, history in cells.items():
        seqs, values = list(history), list(history.values())
        points += len(values)
        tol = cell_tolerance(source_slug=SOURCE, cell=cell[:6]).value
        verdict = detect.detect(values, tolerance=tol)
        status[verdict.status] += 1
        for ch in verdict.changes:
            kinds[ch.kind, ch.direction] += 1
            per_kernel[cell[0]][ch.kind, ch.direction] += 1
            at[folders[seqs[ch.index]], ch.kind, ch.direction].append(cell[0])
            moves[folders[seqs[ch.index]], ch.kind, ch.direction].append((cell[3], ch.shift))
            if ch.kind == detect.STEP:
                after = values[ch.index + 1 : ch.index + 1 + COMEBACK]
                level = statistics.median(after) if after else ch.after
                if abs(level - ch.before) / ch.before <= ch.threshold:
                    comebacks += 1
    print(f"{len(folders)} publications, {len(cells)} cells, {points} points under {root.name}")
    print(
        f"cells: {status[detect.JUDGED]} judged, {status[detect.NOISY]} too noisy to judge, "
        f"{status[detect.SHORT]} with too few points"
    )
    candidates = sum(kinds.values())
    outliers = kinds[detect.OUTLIER, detect.REGRESSION] + kinds[detect.OUTLIER, detect.IMPROVEMENT]
    steps = kinds[detect.STEP, detect.REGRESSION] + kinds[detect.STEP, detect.IMPROVEMENT]
    print(f"points beyond the threshold: {candidates}")
    print(f"  reverted at the next publication (outliers, not reported): {outliers}")
    print(f"  pending (last publication, not yet settled): "
          f"{kinds[detect.PENDING, detect.REGRESSION] + kinds[detect.PENDING, detect.IMPROVEMENT]}")  # fmt: skip
    print(f"  steps reported: {steps} ({kinds[detect.STEP, detect.REGRESSION]} regressions, "
          f"{kinds[detect.STEP, detect.IMPROVEMENT]} improvements)")  # fmt: skip
    print(f"  steps whose next {COMEBACK} points came back to the old level: {comebacks}")
    grouped = {k: v for k, v in at.items() if detect.grouped(v)}
    in_groups = sum(len(v) for k, v in grouped.items() if k[1] == detect.STEP)
    print(f"  steps inside a group (moved with >= {detect.GROUP_MIN_CELLS} cells of >= "
          f"{detect.GROUP_MIN_KERNELS} kernels at one publication): {in_groups}")  # fmt: skip
    print()
    print("groups (publication, kind, direction: cells of kernels, median shift, cells of")
    print("providers other than Liger's, whose code does not change with Liger's commits)")
    for key, kernels in sorted(grouped.items(), key=lambda kv: -len(kv[1])):
        pub, kind, direction = key
        shift = statistics.median(m for _, m in moves[key])
        others = sum(not p.startswith("liger") for p, _ in moves[key])
        print(f"  {pub:16} {kind:8} {direction:12} {len(kernels):5} cells of "
              f"{len(set(kernels)):3} kernels  {shift:+7.1%}  {others:4} not Liger's")  # fmt: skip
    print()
    print(f"{'kernel':36} {'step+':>6} {'step-':>6} {'outlier':>8} {'pending':>8}")
    for kernel, c in sorted(per_kernel.items()):
        print(
            f"{kernel:36} {c[detect.STEP, detect.REGRESSION]:>6} "
            f"{c[detect.STEP, detect.IMPROVEMENT]:>6} "
            f"{c[detect.OUTLIER, detect.REGRESSION] + c[detect.OUTLIER, detect.IMPROVEMENT]:>8} "
            f"{c[detect.PENDING, detect.REGRESSION] + c[detect.PENDING, detect.IMPROVEMENT]:>8}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

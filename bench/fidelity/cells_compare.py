"""Peak memory cell by cell: upstream's whole script, its own function on a fresh allocator
(bench/fidelity/script_cells.py), and the runner.

    DATABASE_URL=sqlite:////tmp/jobs.sqlite3 .venv/bin/python bench/fidelity/cells_compare.py \
        --cells bench/fidelity/h100-ab7fe2a/cells/cells.jsonl \
        --batch data/reruns/h100-2026-12-05 --scripts bench/fidelity/h100-ab7fe2a [--commit ab7fe2a]

For every memory cell of the kernels script_cells.py ran, one line: the script's reading as
its whole process gave it (the device calls under --scripts), the `fresh` and `again`
readings of its own `bench_memory_*` function, the requested peak (what the code asked for,
before the caching allocator's rounding) of each, and the runner's reading from the batch.
Then how many cells each pair agrees on to the MiB (compare.py's criterion).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "h100"))

from fidelity import (  # noqa: E402
    COMMIT,
    _django,
    runner_rows,
    script_rows,
    tool_lines,
    tool_readings,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", required=True, type=Path)
    ap.add_argument("--batch", required=True, type=Path)
    ap.add_argument("--scripts", required=True, type=Path)
    ap.add_argument("--commit", default=COMMIT)
    ap.add_argument("--gpu", default="NVIDIA H100 80GB HBM3")
    args = ap.parse_args()
    _django()
    tool = tool_readings(tool_lines([args.cells]), args.gpu)
    whole = script_rows(args.scripts)
    runner = {r["key"]: r["runner"] for r in runner_rows(args.batch, {}, args.commit)}
    pairs = {"runner=whole": 0, "runner=fresh": 0, "fresh=whole": 0, "fresh=again": 0,
             "requested fresh=again": 0}  # fmt: skip
    shown = 0
    for key in sorted(tool):
        t = tool[key]
        w = statistics.median(whole[key].values()) if key in whole else None
        r = runner.get(key)
        same = {
            "runner=whole": (r, w),
            "runner=fresh": (r, t.get("fresh")),
            "fresh=whole": (t.get("fresh"), w),
            "fresh=again": (t.get("fresh"), t.get("again")),
            "requested fresh=again": (t.get("fresh-requested"), t.get("again-requested")),
        }
        for name, (a, b) in same.items():
            pairs[name] += a is not None and b is not None and abs(a - b) < 1.0
        shown += 1
        print("/".join(map(str, key)), " ".join(
            f"{name} {value:.3f}" if value is not None else f"{name} -"
            for name, value in (("whole", w), ("fresh", t.get("fresh")),
                                ("again", t.get("again")), ("runner", r),
                                ("requested", t.get("fresh-requested")),
                                ("requested-again", t.get("again-requested")))))  # fmt: skip
    print(f"{shown} cells; within 1 MiB: " + ", ".join(f"{k} {v}" for k, v in pairs.items()))


if __name__ == "__main__":
    main()

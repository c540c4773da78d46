"""Runner against upstream's script, cell by cell: bench/fidelity/<batch>/.

    python bench/fidelity/compare.py bench/fidelity/h100-2026-12-05 [--cells]

Reads upstream's rows (`upstream-a/upstream.csv`, the first call's, and
`<runner>/upstream-*/upstream.csv`, the script run on the runner's host in the same device
call, preferred where present) and the runner's results (`<runner>/<phase>/`, `--runner`
runner-b, runner-c or runner-d),
and prints per kernel, provider, pass and metric the runner/script ratio of the medians
(memory: also the difference in MiB); `--cells` prints every cell.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from pathlib import Path

# The swept parameter of each kernel's script (its x_name), as the runner names it.
X_OF = {"geglu": "seq", "swiglu": "seq", "cross_entropy": "vocab"}


def script_rows(path: Path) -> dict[tuple, float]:
    out = {}
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            metric = "latency" if r["metric_name"] == "speed" else "memory"
            key = (r["kernel_name"], r["kernel_provider"], r["kernel_operation_mode"], metric)
            out[key + (int(float(r["x_value"])),)] = float(r["y_value_50"])
    return out


def runner_results(folder: Path) -> dict[tuple, dict]:
    out = {}
    for f in sorted(folder.glob("*.json")):
        p = json.loads(f.read_text())["payload"]
        ran = p["workload"]["ran"]
        x = ran[X_OF.get(p["benchmark"], "hidden")]
        out[(p["benchmark"], p["provider"], p["pass"], p["metric"], x)] = p
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("batch")
    ap.add_argument("--cells", action="store_true")
    ap.add_argument(
        "--phases", default="memory,memory-dyt,selfrun,dyt,dyt-fresh,ce-on,ce-off,ce-on2"
    )
    ap.add_argument(
        "--runner", default="runner-b", help="runner-b, runner-c or runner-d (the device call)"
    )
    args = ap.parse_args()
    batch = Path(args.batch)
    script = script_rows(batch / "upstream-a" / "upstream.csv")
    script_here: dict[tuple, float] = {}
    for same_host in sorted((batch / args.runner).glob("upstream-*/upstream.csv")):
        script_here.update(script_rows(same_host))
    for phase in args.phases.split(","):
        results = runner_results(batch / args.runner / phase)
        if not results:
            continue
        print(f"## {phase}")
        groups: dict[tuple, list] = {}
        for key, p in sorted(results.items()):
            m = p.get("measurement") or {}
            ref = script_here.get(key, script.get(key))
            if ref is None or m.get("median") is None:
                continue
            ratio = m["median"] / ref
            kind = ((m.get("diagnostics") or {}).get("classification") or {}).get("kind")
            group = key[:4] + ((kind or "unclassified",) if key[3] == "latency" else ())
            groups.setdefault(group, []).append((key[4], m["median"], ref, ratio, p))
            if args.cells:
                extra = ""
                if key[3] == "memory":
                    extra = f" diff {m['median'] - ref:+.3f} MiB"
                else:
                    d = (m.get("diagnostics") or {}).get("classification") or {}
                    extra = f" {d.get('kind', '')} device {d.get('deviceMs', float('nan')):.4f}"
                print(
                    f"  {'/'.join(map(str, key))}: runner {m['median']:.4f} script {ref:.4f} ratio {ratio:.3f}{extra}"
                )
        for g, cells in groups.items():
            ratios = [c[3] for c in cells]
            line = f"{'/'.join(g)}: n={len(cells)} ratio median {statistics.median(ratios):.3f} min {min(ratios):.3f} max {max(ratios):.3f}"
            if g[3] == "memory":
                diffs = [c[1] - c[2] for c in cells]
                line += f"; runner-script MiB min {min(diffs):+.2f} max {max(diffs):+.2f}"
            print(line)


if __name__ == "__main__":
    main()

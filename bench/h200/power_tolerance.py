"""The tolerance for a cell timed power-capped: the spread we ourselves see for its class.

    .venv/bin/python bench/h200/power_tolerance.py                 # print the table
    .venv/bin/python bench/h200/power_tolerance.py --write data/tolerance/h200-power-capped.json

A GPU at its power cap runs its SM clock wherever the power controller puts it (1,470 to
1,980 MHz on the lent H200 for one geglu cell), so a power-capped cell's figure moves between
processes and days more than an uncapped cell's, on every host, upstream's too. The rule
(runs.evidence) judges such a cell against the larger of its upstream tolerance and this
spread.

Reads every signed latency result under data/reruns/*/results and */repeats (status ok, on
CUDA, classified device-bound: the rule judges only those figures against a tolerance, and a
host-bound do_bench figure moves with the host's launch path, not the GPU's clocks, so its
spread says nothing of power; with a `power` window: runners before kirunner/power.py
recorded none, and for those the NVML reading after the measurement's power-cap bit stands
in). A cell (GPU product, kernel, pass,
provider, workload) is power-capped when any of its results was. For each power-capped cell
measured by at least two processes (any day), each process's do_bench median's deviation from
the cell's median; pooled per class (kernel, provider). The class's tolerance is the largest
deviation seen, rounded up to a whole percent (it must cover the spread we saw, not 95 % of
it: there are few observations), at least FLOOR; classes with fewer than MIN_CELLS cells
fall back to all power-capped cells pooled ("any").
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

FLOOR = 0.05
MIN_CELLS = 3
POWER_CAP_BIT = 0x4


def _capped(measurement: dict) -> bool:
    from kirunner.power import power_capped

    if "power" in measurement:
        return power_capped(measurement["power"])
    after = ((measurement.get("diagnostics") or {}).get("clocks") or {}).get("after") or {}
    mask = after.get("clockEventReasons")
    return isinstance(mask, int) and bool(mask & POWER_CAP_BIT)


def observations(root: Path) -> dict[tuple, list[tuple[str, float, bool]]]:
    """cell -> [(batch/file, do_bench median ms, power-capped)] over every process."""
    cells: dict[tuple, list[tuple[str, float, bool]]] = defaultdict(list)
    for path in sorted(root.glob("*/results/*.json")) + sorted(root.glob("*/repeats/*.json")):
        payload = json.loads(path.read_text()).get("payload") or {}
        m = payload.get("measurement") or {}
        if payload.get("status") != "ok" or payload.get("device") != "cuda":
            continue
        if payload.get("metric") != "latency" or not isinstance(m.get("median"), int | float):
            continue
        kind = ((m.get("diagnostics") or {}).get("classification") or {}).get("kind")
        if kind != "device-bound":
            continue
        wl = json.dumps((payload.get("workload") or {}).get("resolved"), sort_keys=True)
        # One GPU product per cell: an H100 and an H200 figure of a workload differ by the
        # GPUs, not by the power controller.
        gpu = (payload.get("environment") or {}).get("gpuName")
        key = (gpu, payload["benchmark"], payload["pass"], payload["provider"], wl)
        cells[key].append((f"{path.parts[-3]}/{path.name}", m["median"], _capped(m)))
    return cells


def _round_up(x: float) -> float:
    return max(FLOOR, math.ceil(x * 100 - 1e-9) / 100)


def table(root: Path) -> dict:
    pooled: dict[str, list[float]] = defaultdict(list)
    n_cells: dict[str, int] = defaultdict(int)
    for (_gpu, bench, _pass, provider, _wl), obs in observations(root).items():
        if len(obs) < 2 or not any(capped for _, _, capped in obs):
            continue
        med = statistics.median(v for _, v, _ in obs)
        devs = [abs(v - med) / med for _, v, _ in obs]
        for klass in (f"{bench}|{provider}", "any"):
            pooled[klass].extend(devs)
            n_cells[klass] += 1
    classes = {
        k: {
            "tolerance": _round_up(max(v)),
            "cells": n_cells[k],
            "observations": len(v),
            "maxDeviation": round(max(v), 6),
        }
        for k, v in sorted(pooled.items())
        if n_cells[k] >= MIN_CELLS or k == "any"
    }
    return {
        "rule": "largest deviation of a process's do_bench median from its power-capped "
        f"cell's median across processes and days, rounded up, at least {FLOOR:.0%} "
        "(bench/h200/power_tolerance.py)",
        "classes": classes,
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--root", type=Path, default=ROOT / "data" / "reruns")
    p.add_argument("--write", type=Path)
    args = p.parse_args()
    doc = table(args.root)
    print(doc["rule"])
    print(f"{'class':32} {'cells':>5} {'obs':>4} {'max dev':>8} {'tolerance':>9}")
    for k, v in doc["classes"].items():
        print(
            f"{k:32} {v['cells']:5} {v['observations']:4} {v['maxDeviation']:8.2%} "
            f"{v['tolerance']:9.0%}"
        )
    if args.write:
        args.write.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()

"""Runner against upstream's script, cell by cell: bench/fidelity/<batch>/.

    python bench/fidelity/compare.py bench/fidelity/h100-2026-12-05 [--cells]

Reads upstream's rows (`upstream-a/upstream.csv`, the first call's, and
`<runner>/upstream-*/upstream.csv`, the script run on the runner's host in the same device
call, preferred where present) and the runner's results (`<runner>/<phase>/`, `--runner`
runner-b, runner-c or runner-d),
and prints per kernel, provider, pass and metric the runner/script ratio of the medians
(memory: also the difference in MiB); `--cells` prints every cell.

    python bench/fidelity/compare.py bench/fidelity/h100-2026-12-05 \
        --write data/fidelity/liger-kernel-ci.json

writes the fidelity table the site serves and the evidence rule reads (runs/fidelity/): per
kernel, provider, pass and metric, from the phases named in SELECTION (each compared with the
script run on the same machine where that call ran it), the runner/script ratio on
device-bound latency, on host-bound latency and on peak memory (median, range, cells), the
GPU, hosts and date, and a status; every kernel, provider, pass and metric the source
publishes that the runner supports and no phase measured is listed as not measured.
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


# The phases the published table is made of: (runner folder, phase, the same-host script
# folder or None for call A's script, the kernels taken from it). Left out: call B's DyT
# memory cells (the runner built one DyT module where the script builds three; call C, after
# that fix, measured them again) and call B's DyT latency (the script it would be compared
# with ran on call A's machine; calls C and D ran both on one machine).
SELECTION = (
    ("runner-b", "memory", "upstream-ce", ("geglu", "swiglu", "cross_entropy")),
    ("runner-c", "memory-dyt", "upstream-dyt", ("dyt_beta=False", "dyt_beta=True")),
    ("runner-c", "selfrun", "upstream-dyt", None),
    ("runner-b", "ce-on", "upstream-ce", ("cross_entropy",)),
    ("runner-b", "ce-off", "upstream-ce", ("cross_entropy",)),
    ("runner-b", "ce-on2", "upstream-ce", ("cross_entropy",)),
    ("runner-c", "dyt", "upstream-dyt", ("dyt_beta=False", "dyt_beta=True")),
    ("runner-d", "dyt-fresh", "upstream-dyt", ("dyt_beta=False", "dyt_beta=True")),
)
LEFT_OUT = (
    "runner-b/memory, DyT cells: measured before the runner built the script's other two DyT "
    "modules (0.009-0.251 MiB below the script); runner-c/memory-dyt measured them again",
    "runner-b/dyt: the script it would be compared with ran on another machine (call A); "
    "runner-c/dyt and runner-d/dyt-fresh ran beside the script on one machine",
)
CALLS = {"upstream-a": "A", "runner-b": "B", "runner-c": "C", "runner-d": "D"}
# Established: device-bound latency within 5 % of the script (median, and at least 95 % of
# the observations); peak memory equal to the MiB (every observation within 1 MiB).
DEVICE_BOUND_LIMIT = 0.05
DEVICE_BOUND_SHARE = 0.95
MEMORY_LIMIT_MIB = 1.0
HOST_BOUND_LIMIT = 0.10


def _stats(ratios: list[float], cells: set) -> dict | None:
    if not ratios:
        return None
    return {
        "median": round(statistics.median(ratios), 4),
        "min": round(min(ratios), 4),
        "max": round(max(ratios), 4),
        "cells": len(cells),
        "observations": len(ratios),
    }


def anchor(kernel: str, timed_pass: str, metric: str, provider: str) -> str:
    """The row's id on the page: kernel-pass-metric-provider, lower case, [a-z0-9_-]."""
    raw = f"{kernel}-{timed_pass}-{metric}-{provider}".lower()
    return "".join(c if c.isalnum() or c in "_-" else "-" for c in raw)


def _published(source_csvs: list[Path], supported: set[str]) -> set[tuple]:
    out = set()
    for path in source_csvs:
        with path.open(newline="") as fh:
            for r in csv.DictReader(fh):
                if r["kernel_name"] not in supported:
                    continue
                metric = "latency" if r["metric_name"] == "speed" else "memory"
                provider = r["kernel_provider"].lower().replace("-", "_")
                out.add((r["kernel_name"], provider, r["kernel_operation_mode"], metric))
    return out


def _status(row: dict) -> tuple[str, str]:
    if row["metric"] == "memory":
        mem = row["memory"]
        if abs(mem["maxDiffMiB"]) < MEMORY_LIMIT_MIB:
            return "established", (
                f"peak memory equal to the script's to the MiB on {mem['observations']} "
                f"readings of {mem['cells']} cells (largest difference "
                f"{mem['maxDiffMiB']:.3f} MiB)"
            )
        why = f"peak memory differs from the script's by up to {mem['maxDiffMiB']:.3f} MiB"
        # bench/fidelity/script_cells.py: upstream's own function, twice in a row, per cell.
        n = mem.get("scriptRepeatCells", 0)
        if n and mem["scriptRepeatMiB"] > 0:
            why += (
                f"; upstream's own function, called twice in a row on the same cell in one "
                f"process, read up to {mem['scriptRepeatMiB']:.3f} MiB apart over {n} of its "
                f"cells, asking for the same bytes both times on "
                f"{mem['scriptRepeatSameRequest']}: what the caching allocator rounds a "
                f"request up to depends on what the process ran before"
            )
        elif n:
            why += (
                f"; upstream's own function, called twice in a row on {n} of its cells in one "
                f"process, read the same both times: the difference is not explained"
            )
        return "not-established", why
    dev, host = row["deviceBound"], row["hostBound"]
    if dev is None:
        return "not-established", (
            "no cell was device-bound on the runner, so no figure compares the kernel's own "
            "time with the script's"
        )
    if (
        abs(dev["median"] - 1) > DEVICE_BOUND_LIMIT
        or dev["within5"] < DEVICE_BOUND_SHARE * dev["observations"]
    ):
        return "not-established", (
            f"device-bound runner/script {dev['median']:.3f} (range {dev['min']:.3f}-"
            f"{dev['max']:.3f}), {dev['within5']} of {dev['observations']} within "
            f"{DEVICE_BOUND_LIMIT:.0%}"
        )
    why = (
        f"device-bound runner/script {dev['median']:.3f} (range {dev['min']:.3f}-"
        f"{dev['max']:.3f}) on {dev['cells']} cell{'s' if dev['cells'] != 1 else ''}"
    )
    if host is not None and abs(host["median"] - 1) > HOST_BOUND_LIMIT:
        why += (
            f"; host-bound cells {host['median']:.3f} of the script, outside "
            f"{HOST_BOUND_LIMIT:.0%}: a host-bound figure gets no verdict on either side"
        )
    return "established", why


# Later commits measured beside their own scripts (bench/h100/fidelity.py): commit, the rerun
# batch holding the runner's results, the folder of the scripts' CSVs. Their rows are merged
# into the 02bac05 table, one row per kernel, provider, pass and metric.
LATER_COMMITS = (
    ("ab7fe2a", "data/reruns/h100-2026-12-05", "bench/fidelity/h100-ab7fe2a"),
    # rope: ab7fe2a published no rope rows; 1fdb668's are the newest H100 ones.
    ("1fdb668", "data/reruns/h100-2026-12-05", "bench/fidelity/h100-1fdb668"),
)


def table(batch: Path, source: str, source_csvs: list[Path]) -> dict:
    """The published fidelity table (module docstring), with LATER_COMMITS' rows merged."""
    out = json.loads(json.dumps(_table_02bac05(batch, source, source_csvs)))
    repo = Path(__file__).resolve().parents[2]
    later = None
    for commit, later_batch, scripts in LATER_COMMITS:
        if not (repo / later_batch / "results").is_dir():
            continue
        import importlib.util

        spec = importlib.util.spec_from_file_location(
            "h100_fidelity", repo / "bench" / "h100" / "fidelity.py"
        )
        later = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(later)
        out = later.merged_commit(out, repo, commit, later_batch, scripts)
    if later is not None:  # the script's own figure per cell, at each commit (bench/h100)
        cells = later.script_cells(sorted(batch.glob("**/upstream.csv")), "02bac05")
        out["scriptCells"] = cells + out.get("scriptCells", [])
    return out


def _table_02bac05(batch: Path, source: str, source_csvs: list[Path]) -> dict:
    """The 02bac05 table: bench/fidelity/<batch>'s phases, every other published cell not
    measured."""
    from kirunner.kernels import KERNELS  # the runner's one registry of supported kernels

    script_a = script_rows(batch / "upstream-a" / "upstream.csv")
    obs: dict[tuple, list] = {}
    meta: dict[tuple, dict] = {}
    for runner, phase, same_host, kernels in SELECTION:
        here = script_rows(batch / runner / same_host / "upstream.csv") if same_host else {}
        for key, p in sorted(runner_results(batch / runner / phase).items()):
            if kernels is not None and key[0] not in kernels:
                continue
            m = p.get("measurement") or {}
            ref, where = here.get(key), runner
            if ref is None:
                ref, where = script_a.get(key), "upstream-a"
            if ref is None or m.get("median") is None:
                continue
            kind = ((m.get("diagnostics") or {}).get("classification") or {}).get("kind")
            row = key[:4]
            obs.setdefault(row, []).append(
                {
                    "cell": key[4],
                    "runner": m["median"],
                    "script": ref,
                    "kind": kind or "unclassified",
                    "phase": f"{runner}/{phase}",
                    "scriptCall": CALLS[where],
                    "protocol": (m.get("details") or {}).get("protocol"),
                }
            )
            info = meta.setdefault(row, {"gpus": set(), "dates": set(), "calls": set()})
            info["gpus"].add((p.get("environment") or {}).get("gpuName"))
            info["dates"].add(str(p.get("startedAt") or "")[:10])
            info["calls"].add(CALLS[runner])
    rows = []
    for (kernel, provider, timed_pass, metric), items in sorted(obs.items()):

        def pick(kinds, items=items):
            chosen = [o for o in items if o["kind"] in kinds]
            return [o["runner"] / o["script"] for o in chosen], {o["cell"] for o in chosen}

        row = {
            "kernel": kernel,
            "provider": provider,
            "pass": timed_pass,
            "metric": metric,
            "anchor": anchor(kernel, timed_pass, metric, provider),
            "gpu": ", ".join(
                sorted(g for g in meta[(kernel, provider, timed_pass, metric)]["gpus"] if g)
            ),
            "date": ", ".join(sorted(meta[(kernel, provider, timed_pass, metric)]["dates"])),
            "calls": sorted(meta[(kernel, provider, timed_pass, metric)]["calls"]),
            "phases": sorted({o["phase"] for o in items}),
            "deviceBound": None,
            "hostBound": None,
            "unclassified": 0,
            "memory": None,
        }
        if metric == "memory":
            ratios, cells = pick(("unclassified",))
            diffs = [o["runner"] - o["script"] for o in items]
            row["memory"] = _stats(ratios, cells) | {
                "maxDiffMiB": round(max(diffs, key=abs), 3),
                "protocol": sorted({o["protocol"] or "none" for o in items}),
            }
        else:
            ratios, cells = pick(("device-bound",))
            row["deviceBound"] = _stats(ratios, cells)
            if row["deviceBound"]:
                row["deviceBound"]["within5"] = sum(
                    abs(r - 1) <= DEVICE_BOUND_LIMIT for r in ratios
                )
            row["hostBound"] = _stats(*pick(("host-bound",)))
            row["unclassified"] = sum(
                o["kind"] not in ("device-bound", "host-bound") for o in items
            )
        row["status"], row["reason"] = _status(row)
        rows.append(row)
    measured = {(r["kernel"], r["provider"], r["pass"], r["metric"]) for r in rows}
    for kernel, provider, timed_pass, metric in sorted(
        _published(source_csvs, set(KERNELS)) - measured
    ):
        rows.append(
            {
                "kernel": kernel,
                "provider": provider,
                "pass": timed_pass,
                "metric": metric,
                "anchor": anchor(kernel, timed_pass, metric, provider),
                "status": "not-measured",
                "reason": "the runner has not been run beside upstream's script for this "
                "kernel, provider, pass and metric",
            }
        )
    rows.sort(key=lambda r: (r["kernel"], r["pass"], r["metric"], r["provider"]))
    return {
        "source": source,
        "batch": batch.as_posix(),
        "generatedBy": f"python bench/fidelity/compare.py {batch.as_posix()} --write "
        f"data/fidelity/{source}.json",
        "upstreamCommit": "02bac05",
        "host": "one lent machine per device call (calls A-D), each with one GPU; "
        "bench/fidelity/README.md gives each call's machine and software",
        "criteria": {
            "deviceBound": f"runner/script median within {DEVICE_BOUND_LIMIT:.0%} of 1, and at "
            f"least {DEVICE_BOUND_SHARE:.0%} of the observations within it",
            "memory": f"every reading within {MEMORY_LIMIT_MIB:g} MiB of the script's",
            "hostBound": f"shown; within {HOST_BOUND_LIMIT:.0%} or explained "
            "(bench/fidelity/README.md); a host-bound figure carries no verdict",
        },
        "leftOut": list(LEFT_OUT),
        "rows": rows,
    }


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
    ap.add_argument("--write", help="write the published table (data/fidelity/<source>.json)")
    ap.add_argument("--source", default="liger-kernel-ci")
    ap.add_argument("--published", default="data/liger-ci", help="the source's CSVs")
    args = ap.parse_args()
    batch = Path(args.batch)
    if args.write:
        # The later commits' rows match the scripts' rows to runs through the ingest's parser.
        import os
        import sys

        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
        import django

        django.setup()
        csvs = sorted(Path(args.published).rglob("*.csv"))
        out = table(batch, args.source, csvs)
        Path(args.write).parent.mkdir(parents=True, exist_ok=True)
        Path(args.write).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
        counts: dict[str, int] = {}
        for r in out["rows"]:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        print(f"{args.write}: {len(out['rows'])} rows {counts}")
        return
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

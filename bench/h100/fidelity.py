"""Runner against upstream's own script at one Liger-Kernel commit, cell by cell, on the H100.

    .venv/bin/python bench/h100/fidelity.py --batch data/reruns/h100-2026-12-05 \
        --scripts bench/fidelity/h100-ab7fe2a [--commit ab7fe2a] [--cells]

Upstream's rows are the CSVs its benchmark scripts wrote on the lent H100
(`<scripts>/<call>/upstream-<kernel>/upstream.csv`, bench/h100/device.sh); the runner's are the
batch's signed results (`results/` and `repeats/`), each matched to the script's row of the
same kernel, provider, pass, metric and workload through the job's run (its external id names
the workload as the ingest does). A runner result is compared with the script run in the same
device call where that call ran the script, else with the script of another call (the GPU
product is the same; host-bound figures then compare across hosts, which the row says).

bench/fidelity/compare.py --write writes the source's fidelity table with this commit's rows
merged in (`merged_commit`, its LATER_COMMITS; read by runs/fidelity/): a kernel, provider, pass and metric measured at both
commits keeps one row whose status is established only where it is at both; the row lists
the commits and the phases of each.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench" / "fidelity"))

from compare import (  # noqa: E402  (bench/fidelity/compare.py: one criterion for both commits)
    DEVICE_BOUND_LIMIT,
    MEMORY_LIMIT_MIB,
    _stats,
    _status,
    anchor,
)

COMMIT = "ab7fe2a"  # the commit of most of the batch's jobs; --commit names another


def _django():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
    import django

    django.setup()


def csv_medians(data: bytes, location: str) -> dict[tuple, float]:
    """(kernel, provider, pass, metric, workload slug) -> the median of each row of an upstream
    benchmark CSV, as the script wrote it."""
    from runs.reference import catalogue
    from runs.sources.parsers import parse_liger_csv

    out = {}
    for row in parse_liger_csv(data, location):
        slug = catalogue.workload_slug(row.params)
        key = (row.benchmark, row.provider, row.timed_pass, row.metric, slug)
        out[key] = next(v for k, v in row.source_metrics.items() if k.endswith("_50"))
    return out


def script_rows(scripts: Path) -> dict[tuple, dict[str, float]]:
    """(kernel, provider, pass, metric, workload slug) -> {call: median} of the scripts' CSVs."""
    out: dict[tuple, dict[str, float]] = {}
    for csv_path in sorted(scripts.glob("*/upstream-*/upstream.csv")):
        call = csv_path.parent.parent.name
        for key, value in csv_medians(csv_path.read_bytes(), str(csv_path)).items():
            out.setdefault(key, {})[call] = value
    return out


def script_cells(csv_paths, commit: str) -> list[dict]:
    """Each cell upstream's scripts measured at `commit`: the median of its readings (one per
    device call that ran the script), on which GPU, in the published runs' unit (ns, B), as
    the ingest reads the CSV. The evidence rule reads them (runs/fidelity/table.py,
    script_cell): a verdict stands only where the script's figure for the cell gives the same."""
    from runs.reference import catalogue
    from runs.sources.parsers import parse_liger_csv

    readings: dict[tuple, dict] = {}
    for csv_path in sorted(csv_paths):
        call = "/".join(csv_path.parts[-3:-1])  # <call>/upstream-<kernel>
        for row in parse_liger_csv(csv_path.read_bytes(), str(csv_path)):
            key = (row.gpu_name, row.benchmark, row.provider, row.timed_pass, row.metric,
                   catalogue.workload_slug(row.params))  # fmt: skip
            cell = readings.setdefault(key, {"values": [], "calls": set(), "unit": row.unit})
            cell["values"].append(row.median)
            cell["calls"].add(call)
    out = []
    for (gpu, kernel, provider, timed_pass, metric, workload), cell in sorted(readings.items()):
        out.append(
            {"commit": commit, "gpu": gpu, "kernel": kernel, "provider": provider,
             "pass": timed_pass, "metric": metric, "workload": workload,
             "figure": statistics.median(cell["values"]), "unit": cell["unit"],
             "calls": sorted(cell["calls"])}
        )  # fmt: skip
    return out


def runner_rows(batch: Path, calls: dict[str, str], commit: str) -> list[dict]:
    """Every finished result of the batch for a run of `commit`, with the key of the run it
    measured (one batch holds the jobs of several commits' runs). An `incorrect`
    result counts: its output missed the runner's check, but what it timed is what the script
    times, and that is all this compares."""
    jobs = {}
    for path in [*batch.glob("jobs/*.json"), *batch.glob("unrun/*.json")]:
        doc = json.loads(path.read_text())
        jobs[doc["job"]["id"]] = doc
    out = []
    for path in sorted([*batch.glob("results/*.json"), *batch.glob("repeats/*.json")]):
        p = json.loads(path.read_text())["payload"]
        job = jobs.get(p["job"]["id"])
        m = p.get("measurement") or {}
        if job is None or p.get("status") not in ("ok", "incorrect") or m.get("median") is None:
            continue
        parts = job["run"]["externalId"].split("/")
        # <commit>/<kernel>/<pass>/<provider>/<gpu>/<workload>/<time>[/memory]
        if parts[0] != commit:
            continue
        key = (
            p["benchmark"],
            p["provider"],
            p["pass"],
            p["metric"],
            parts[5],
        )
        kind = ((m.get("diagnostics") or {}).get("classification") or {}).get("kind")
        out.append(
            {
                "key": key,
                "runner": m["median"],
                "kind": kind or "unclassified",
                "protocol": (m.get("details") or {}).get("protocol"),
                "call": calls.get(path.name, "?"),
                "date": str(p.get("startedAt") or "")[:10],
                "gpu": (p.get("environment") or {}).get("gpuName"),
                "file": path.name,
            }
        )
    return out


def observations(batch: Path, scripts: Path, calls: dict[str, str], commit: str) -> list[dict]:
    script = script_rows(scripts)
    obs = []
    for r in runner_rows(batch, calls, commit):
        by_call = script.get(r["key"])
        if not by_call:
            continue
        same = r["call"] in by_call
        ref_call = r["call"] if same else sorted(by_call)[0]
        obs.append(r | {"script": by_call[ref_call], "scriptCall": ref_call, "sameHost": same})
    return obs


# Upstream's CSV columns, for readings of upstream's own function written as its scripts
# write them (script_repeats).
CSV_COLUMNS = ("kernel_name", "kernel_provider", "kernel_operation_mode", "metric_name",
               "metric_unit", "x_name", "x_label", "x_value", "y_value_50", "y_value_20",
               "y_value_80", "extra_benchmark_config_str", "gpu_name", "timestamp",
               "liger_version")  # fmt: skip


def tool_readings(lines: list[dict], gpu: str) -> dict[tuple, dict[str, float]]:
    """bench/fidelity/script_cells.py's lines keyed as script_rows keys the scripts' CSVs:
    {key: {phase: median}} for the phases `fresh` and `again`, and `fresh-requested` and
    `again-requested` for the medians of their requested peaks. Each phase's readings are
    written as upstream's CSV and read by the ingest's parser, which names the workload."""
    import csv
    import io

    out: dict[tuple, dict[str, float]] = {}
    for phase in ("fresh", "again", "fresh-requested", "again-requested"):
        text = io.StringIO()
        writer = csv.writer(text)
        writer.writerow(CSV_COLUMNS)
        for line in (x for x in lines if x["phase"] == phase.split("-")[0]):
            value = line["y50"]
            if phase.endswith("requested"):
                value = statistics.median(line["requestedMiB"])
            writer.writerow((line["kernel"], line["provider"], line["mode"], "memory", "MB",
                             line["x_name"], line["x_name"], line["x"], value, value, value,
                             line["config"], gpu, "2026-12-07 00:00:00", "0"))  # fmt: skip
        for key, value in csv_medians(text.getvalue().encode(), f"script_cells {phase}").items():
            out.setdefault(key, {})[phase] = value
    return out


def tool_lines(paths) -> list[dict]:
    """script_cells.py's lines in these files. The scripts print to stdout too (the distill
    losses their logits' shapes): the tool's lines are the JSON ones."""
    return [
        json.loads(text)
        for path in paths
        for text in Path(path).read_text().splitlines()
        if text.startswith("{")
    ]


def script_repeats(scripts: Path, gpu: str = "NVIDIA H100 80GB HBM3") -> dict[tuple, tuple]:
    """(MiB apart, requested the same) of upstream's own memory function on each cell called
    twice in a row in one process (script_cells.py's `fresh` and `again`, under
    <scripts>/cells/): how far apart its readings were, and whether the code asked for the
    same bytes both times (the requested peaks within 1 KiB)."""
    lines = tool_lines(sorted(scripts.glob("cells/*/cells.jsonl")))
    return {
        key: (
            abs(p["fresh"] - p["again"]),
            abs(p["fresh-requested"] - p["again-requested"]) < 1 / 1024,
        )
        for key, p in tool_readings(lines, gpu).items()
        if "fresh" in p and "again" in p
    }


def _repeat(items: list[dict], repeats: dict[tuple, tuple]) -> dict:
    """Upstream's own repeatability on the row's cells, where script_cells.py measured it."""
    found = [repeats[k] for k in {o["key"] for o in items} if k in repeats]
    if not found:
        return {}
    return {
        "scriptRepeatMiB": round(max(apart for apart, _ in found), 3),
        "scriptRepeatCells": len(found),
        "scriptRepeatSameRequest": sum(same for _, same in found),
    }


def rows(obs: list[dict], commit: str, repeats: dict[tuple, tuple] | None = None) -> list[dict]:
    grouped: dict[tuple, list[dict]] = {}
    for o in obs:
        grouped.setdefault(o["key"][:4], []).append(o)
    out = []
    for (kernel, provider, timed_pass, metric), items in sorted(grouped.items()):

        def pick(kinds, items=items):
            chosen = [o for o in items if o["kind"] in kinds]
            return [o["runner"] / o["script"] for o in chosen], {o["key"][4] for o in chosen}

        row = {
            "kernel": kernel,
            "provider": provider,
            "pass": timed_pass,
            "metric": metric,
            "anchor": anchor(kernel, timed_pass, metric, provider),
            "gpu": ", ".join(sorted({o["gpu"] for o in items if o["gpu"]})),
            "date": ", ".join(sorted({o["date"] for o in items})),
            "calls": sorted({o["call"] for o in items}),
            "phases": sorted({f"{commit}/{o['call']}" for o in items}),
            "upstreamCommits": [commit],
            "deviceBound": None,
            "hostBound": None,
            "unclassified": 0,
            "memory": None,
            "sameHostShare": round(sum(o["sameHost"] for o in items) / len(items), 3),
        }
        if metric == "memory":
            ratios, cells = pick(("unclassified",))
            diffs = [o["runner"] - o["script"] for o in items]
            row["memory"] = (
                _stats(ratios, cells)
                | {
                    "maxDiffMiB": round(max(diffs, key=abs), 3),
                    "protocol": sorted({o["protocol"] or "none" for o in items}),
                }
                | _repeat(items, repeats or {})
            )
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
        row["reason"] = f"at {commit}: {row['reason']}"
        out.append(row)
    return out


# What a merged row keeps of each commit's own measurement.
PER_COMMIT = ("status", "reason", "deviceBound", "hostBound", "memory", "calls", "phases", "date")


def merged(table: dict, new_rows: list[dict], meta: dict, commit: str) -> dict:
    """The table with the commit's rows: one row per kernel, provider, pass and metric."""
    old = {(r["kernel"], r["provider"], r["pass"], r["metric"]): r for r in table["rows"]}
    for row in new_rows:
        key = (row["kernel"], row["provider"], row["pass"], row["metric"])
        before = old.get(key)
        if before is None or before["status"] == "not-measured":
            old[key] = row
            continue
        # Measured at both commits: one row, established only where both are.
        both = dict(before)
        both["upstreamCommits"] = sorted(
            set(before.get("upstreamCommits", [table["upstreamCommit"]])) | {commit}
        )
        # A row merged before keeps each earlier commit's own measurement.
        earlier = before.get("byCommit") or {
            before.get("upstreamCommits", [table["upstreamCommit"]])[0]: {
                k: before.get(k) for k in PER_COMMIT
            }
        }
        both["byCommit"] = {**earlier, commit: {k: row.get(k) for k in PER_COMMIT}}
        both["date"] = ", ".join(
            sorted(set(before.get("date", "").split(", ")) | set(row["date"].split(", ")) - {""})
        )
        both["phases"] = sorted(set(before.get("phases", [])) | set(row["phases"]))
        if before["status"] == "established" and row["status"] == "established":
            both["status"] = "established"
            both["reason"] = f"{before['reason']}; {row['reason']}"
        else:
            both["status"] = "not-established"
            failed = [r for r in (before, row) if r["status"] != "established"]
            both["reason"] = "; ".join(r["reason"] for r in failed)
        old[key] = both
    out = dict(table)
    out["rows"] = sorted(
        old.values(), key=lambda r: (r["kernel"], r["pass"], r["metric"], r["provider"])
    )
    out["commits"] = {**table.get("commits", {}), commit: meta}
    return out


def failed_scripts(scripts: Path, commit: str) -> dict[str, str]:
    """kernel -> why its script gave no row: each `<call>/upstream-<kernel>/` whose script
    wrote no CSV, with the error its log ends on, or the call's deadline where it ends on
    the script's start line (device.sh stopped it)."""
    out = {}
    for log in sorted(scripts.glob("*/upstream-*/upstream.log")):
        kernel = log.parent.name.removeprefix("upstream-")
        if (log.parent / "upstream.csv").exists():
            continue
        lines = [line for line in log.read_text().splitlines() if line.strip()]
        errors = [line for line in lines if "Error" in line and not line.startswith("===")]
        call = log.parent.parent.name
        if errors:
            what = f"it failed: {errors[-1].strip()[:200]}"
        else:
            what = "it had written no row when the call's deadline stopped it"
        out[kernel] = (
            f"upstream's benchmark_{kernel}.py at {commit} was run on the lent H100 ({call}) "
            f"and {what}; nothing to compare the runner with"
        )
    return out


def with_failed_scripts(table: dict, scripts: Path, commit: str) -> dict:
    """Not-measured rows of a kernel whose script was run and gave no row say so."""
    failed = failed_scripts(scripts, commit)
    rows = [
        r | {"reason": failed[r["kernel"]]}
        if r["status"] == "not-measured" and r["kernel"] in failed
        else r
        for r in table["rows"]
    ]
    return table | {"rows": rows}


def merged_commit(table: dict, repo: Path, commit: str, batch: str, scripts: str) -> dict:
    """bench/fidelity/compare.py's table with this commit's rows merged (its LATER_COMMITS)."""
    calls_file = repo / batch / "logs" / "result-calls.json"
    calls = json.loads(calls_file.read_text()) if calls_file.exists() else {}
    obs = observations(repo / batch, repo / scripts, calls, commit)
    new_rows = rows(obs, commit, script_repeats(repo / scripts))
    table = with_failed_scripts(table, repo / scripts, commit)
    meta = {
        "batch": batch,
        "scripts": scripts,
        "comparedBy": f"python bench/h100/fidelity.py --batch {batch} --scripts {scripts} "
        f"--commit {commit} --cells",
        "host": "the lent nvidia-h100-x1 machine, one NVIDIA H100 80GB HBM3 per device call; "
        f"{scripts}/README.md gives each call",
        "rows": len(new_rows),
    }
    out = merged(table, new_rows, meta, commit)
    cells = script_cells((repo / scripts).glob("*/upstream-*/upstream.csv"), commit)
    out["scriptCells"] = [c for c in out.get("scriptCells", []) if c["commit"] != commit] + cells
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", required=True, type=Path)
    ap.add_argument("--scripts", required=True, type=Path)
    ap.add_argument("--commit", default=COMMIT)
    ap.add_argument("--cells", action="store_true")
    args = ap.parse_args()
    _django()
    calls_file = args.batch / "logs" / "result-calls.json"
    calls = json.loads(calls_file.read_text()) if calls_file.exists() else {}
    obs = observations(args.batch, args.scripts, calls, args.commit)
    new_rows = rows(obs, args.commit, script_repeats(args.scripts))
    if args.cells:
        for o in obs:
            print("/".join(o["key"]), f"runner {o['runner']:.5g} script {o['script']:.5g}",
                  f"ratio {o['runner'] / o['script']:.3f} {o['kind']} {o['call']}/{o['scriptCall']}")  # fmt: skip
    counts: dict[str, int] = {}
    for r in new_rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
        print(f"{r['anchor']}: {r['status']}: {r['reason']}")
    print(f"{len(new_rows)} rows at {args.commit}: {counts}")
    print(criteria(obs, args.commit))


def criteria(obs: list[dict], commit: str) -> str:
    """Issue 42's done-when figures over every observation: the device-bound runner/script
    median and the share within 5 %, and the memory readings equal to the script's to the MiB
    (less than MEMORY_LIMIT_MIB apart, compare.py's criterion)."""
    import statistics

    device = [o["runner"] / o["script"] for o in obs if o["kind"] == "device-bound"]
    memory = [o for o in obs if o["key"][3] == "memory"]
    equal = sum(abs(o["runner"] - o["script"]) < MEMORY_LIMIT_MIB for o in memory)
    within = sum(abs(r - 1) <= DEVICE_BOUND_LIMIT for r in device)
    return (
        f"criteria at {commit}: device-bound median {statistics.median(device):.3f} on "
        f"{len(device)} cells, {within / len(device):.1%} within 5 %; memory equal to the MiB "
        f"on {equal} of {len(memory)} readings ({equal / len(memory):.1%})"
    )


if __name__ == "__main__":
    main()

"""Per kernel, over every H200 row of one upstream CI commit: rows, rows with a verdict,
reproduced / not reproduced / checked / incorrect, the device-bound share of the latency
results, and the batches' throughput (jobs per device-minute, seconds per phase), from the signed results.

    DATABASE_URL=... .venv/bin/python bench/h200/summarize.py --kernels [--commit 02bac05]

Needs the database `manage.py demo` loads. A row "has a verdict" when its evidence level is
anything but `reported` (checked, reproduced, not-reproduced, incorrect). The device-bound
share counts each row's latest latency event that recorded a classification. Throughput is
read from the result files under data/reruns/*/results and */repeats: one runner process's
results share `runner.process` (older results: one process per batch folder and repeat), its
span is first start to last finish, and jobs per device-minute is jobs / span.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def throughput(root: Path) -> tuple[dict, dict]:
    """(per process: batch, jobs, span s, per-kernel job seconds), (per kernel: phase medians)."""
    processes: dict[str, dict] = {}
    phases: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(root.glob("*/results/*.json")) + sorted(root.glob("*/repeats/*.json")):
        p = json.loads(path.read_text()).get("payload") or {}
        if not p.get("startedAt") or not p.get("finishedAt"):
            continue
        batch = path.parts[-3]
        key = (p.get("runner") or {}).get("process") or f"{batch}/{path.parts[-2]}"
        proc = processes.setdefault(
            key, {"batch": batch, "jobs": 0, "start": None, "end": None, "kernels": Counter()}
        )
        start, end = _when(p["startedAt"]), _when(p["finishedAt"])
        proc["jobs"] += 1
        proc["kernels"][p.get("benchmark")] += 1
        proc["start"] = min(proc["start"] or start, start)
        proc["end"] = max(proc["end"] or end, end)
        for name, seconds in (p.get("phasesS") or {}).items():
            phases[p.get("benchmark")][name].append(seconds)
    per_phase = {
        k: {name: statistics.median(v) for name, v in ph.items()} for k, ph in phases.items()
    }
    return processes, per_phase


def table(commit: str) -> None:
    from runs.models import EvidenceEvent, Run

    rows = Run.objects.public().filter(
        source__slug="liger-kernel-ci",
        publication__upstream_commit__startswith=commit,
        environment__gpu__product="NVIDIA H200",
    )
    by_kernel: dict[str, Counter] = defaultdict(Counter)
    for slug, level in rows.values_list("benchmark__slug", "evidence"):
        by_kernel[slug]["rows"] += 1
        by_kernel[slug][level] += 1
    kinds: dict[str, Counter] = defaultdict(Counter)
    latest: dict[int, tuple[str, str]] = {}
    events = EvidenceEvent.objects.filter(run__in=rows, run__metric="latency").order_by("id")
    for run_id, slug, facts in events.values_list("run_id", "run__benchmark__slug", "facts"):
        kind = ((facts or {}).get("classification") or {}).get("kind")
        if kind:
            latest[run_id] = (slug, kind)
    for slug, kind in latest.values():
        kinds[slug][kind] += 1
    processes, per_phase = throughput(ROOT / "data" / "reruns")
    job_seconds: dict[str, float] = defaultdict(float)
    job_count: Counter = Counter()
    for proc in processes.values():
        span = (proc["end"] - proc["start"]).total_seconds()
        for k, n in proc["kernels"].items():
            job_seconds[k] += span * n / proc["jobs"]
            job_count[k] += n

    print(f"H200 rows of upstream CI commit {commit}, per kernel")
    print(
        "| kernel | rows | with a verdict | reproduced | not reproduced | checked | incorrect | "
        "device-bound share | jobs per device-minute | median s per phase |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    total = Counter()
    for slug in sorted(by_kernel):
        c = by_kernel[slug]
        verdict = c["rows"] - c["reported"]
        total.update(rows=c["rows"], verdict=verdict, r=c["reproduced"], nr=c["not-reproduced"])
        total.update(checked=c["checked"], incorrect=c["incorrect"])
        k = kinds[slug]
        share = f"{k['device-bound'] / sum(k.values()):.0%} of {sum(k.values())}" if k else "–"
        rate = f"{job_count[slug] / job_seconds[slug] * 60:.1f}" if job_seconds[slug] else "–"
        ph = ", ".join(f"{n} {v:.2f}" for n, v in per_phase.get(slug, {}).items() if v >= 0.01)
        print(
            f"| {slug} | {c['rows']} | {verdict} | {c['reproduced']} | {c['not-reproduced']} "
            f"| {c['checked']} | {c['incorrect']} | {share} | {rate} | {ph or '–'} |"
        )
    print(
        f"| all | {total['rows']} | {total['verdict']} | {total['r']} | {total['nr']} "
        f"| {total['checked']} | {total['incorrect']} | | | |"
    )
    print()
    print("runner processes (jobs per device-minute = jobs / first start to last finish)")
    for proc in sorted(processes.values(), key=lambda p: p["start"]):
        span = (proc["end"] - proc["start"]).total_seconds()
        rate = proc["jobs"] / span * 60 if span > 0 else float("nan")
        kernels = ", ".join(f"{k} {n}" for k, n in proc["kernels"].most_common(4))
        print(
            f"  {proc['batch']}: {proc['jobs']} jobs in {span:.0f} s = {rate:.1f}/min ({kernels})"
        )

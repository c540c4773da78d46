"""Print a batch's table: each cell's upstream H200 figures beside our measurements and verdict.

    DATABASE_URL=... .venv/bin/python bench/h200/summarize.py data/reruns/h200-2026-11-30
    DATABASE_URL=... .venv/bin/python bench/h200/summarize.py --kernels   # per kernel, all batches

Needs a database with both Liger sources and the batch loaded (`manage.py demo --no-serve`).
Columns: the cell; upstream's median in the CI run the job re-measured, and the spread of
that cell's medians across every upstream CI run that has it ((max - min) / min); our
do_bench median (the primary result) and the other processes' medians; the cold device time;
the host enqueue time per call; the classification; the tolerance the rule used; the
verdict, or the reason there is none. Then the share of device-bound cells reproduced and
every not-reproduced verdict with its reason.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "h200"))


def _us(ms: float | None) -> str:
    return "–" if ms is None else f"{ms * 1e3:.1f}"


def main(folder: Path) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
    import django

    django.setup()
    import tolerance

    from reruns.models import RerunJob

    cells = tolerance.cell_medians(ROOT / "data" / "liger-ci")
    repeats: dict[str, list[float]] = defaultdict(list)
    for path in sorted((folder / "repeats").glob("*.json")):
        name = re.sub(r"\.[^.]+\.json$", "", path.name)
        median = (json.loads(path.read_text())["payload"].get("measurement") or {}).get("median")
        if median is not None:
            repeats[name].append(median)

    print(
        "| cell | upstream median (spread across CI runs) | our do_bench (other processes) "
        "| device | host enqueue | classification | tolerance | verdict |"
    )
    print("|---|---|---|---|---|---|---|---|")
    kinds: Counter = Counter()
    misses = []
    for job_path in sorted((folder / "jobs").glob("*.json")):
        name = job_path.stem
        doc = json.loads(job_path.read_text())
        job = (
            RerunJob.objects.select_related(
                "run__benchmark",
                "run__implementation",
                "run__workload",
                "run__environment__gpu",
                "receipt__evidence_event",
            )
            .filter(uuid=doc["job"]["id"])
            .first()
        )
        if job is None or not hasattr(job, "receipt"):
            print(f"| {name}: not loaded | | | | | | | |")
            continue
        run, payload = job.run, job.receipt.payload
        m = payload.get("measurement") or {}
        latency = run.metric == "latency"
        cell = (
            run.benchmark.slug,
            run.timed_pass,
            run.metric,
            run.implementation.provider_key,
            run.workload.slug,
            run.environment.gpu.upstream_name,
        )
        upstream = cells.get(cell, {})
        spread = ""
        if len(upstream) > 1:
            values = list(upstream.values())
            spread = f" ({(max(values) - min(values)) / min(values):.0%} over {len(values)})"
        published = run.median / 1e6 if latency else run.median / 2**20
        unit = "us" if latency else "MiB"
        ours = m.get("median")
        others = repeats.get(name, [])

        def fmt(v: float, latency: bool = latency) -> str:
            return _us(v) if latency else f"{v:.1f}"

        event = job.receipt.evidence_event
        facts = event.facts if event else {}
        cls = facts.get("classification") or {}
        verdict = event.outcome if event else job.error
        if cls.get("kind") == "device-bound" and facts.get("gpuProduct") == facts.get(
            "originalGpuProduct"
        ):
            kinds[event.outcome] += 1
        if event and event.outcome == "not-reproduced":
            misses.append(f"{name}: {facts.get('why')}")
        tol = facts.get("tolerance")
        label = (
            f"{run.benchmark.slug} {run.timed_pass} {run.metric} {run.implementation.provider_key}"
            f" {run.workload.slug} ({run.environment.gpu.upstream_name})"
        )
        print(
            f"| {label} | {fmt(published)} {unit}{spread} "
            f"| {fmt(ours) if ours is not None else '–'}"
            f"{' (' + ', '.join(fmt(v) for v in others) + ')' if others else ''} "
            f"| {_us(cls.get('deviceMs'))} | {_us(cls.get('hostEnqueueMs'))} "
            f"| {cls.get('kind', '–')} "
            f"| {'–' if tol is None else f'{tol:.0%} ' + str(facts.get('toleranceSource'))} "
            f"| {verdict[:120]} |"
        )
    total = sum(kinds.values())
    print()
    print(
        f"device-bound same-product latency cells: {total}; "
        + ", ".join(f"{k} {v} ({v / total:.0%})" for k, v in kinds.most_common())
        if total
        else "no device-bound same-product latency cells"
    )
    print(f"not-reproduced: {len(misses)}")
    for line in misses:
        print(f"  {line}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--kernels"]:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
        import django

        django.setup()
        import per_kernel

        args = sys.argv[2:]
        per_kernel.table(args[args.index("--commit") + 1] if "--commit" in args else "02bac05")
    else:
        main(Path(sys.argv[1]))

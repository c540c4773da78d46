"""Issue the job files of a controlled H200 rerun batch from the runs in the database.

    .venv/bin/python bench/h200/issue_jobs.py --out data/reruns/h200-2026-11-30/jobs
    .venv/bin/python bench/h200/issue_jobs.py --selection first --out data/reruns/h200-2026-11-29/jobs

Writes one RerunJob document per selected run with the server's own `job_document` (the
shape `manage.py rerun export` writes), each with a fresh UUID and nonce. `manage.py rerun load-demo` later creates the job rows from these
files and records the signed results that the GPU host returned for them.
Selections:
- `all-h200` (default): the example page's llama4_rope workload (H100 rows of
  liger-kernel-bench, every pass and metric, liger and huggingface) and every row of the latest
  upstream CI run that has NVIDIA H200 rows, for every kernel, pass, metric and provider the
  runner supports (1,828 rows at commit 02bac05: every kernel name of those rows).
- `unjudged-h200`: the rows of `all-h200` that carry no verdict yet.
- `one-process-h200`: the latency rows of `all-h200` that fewer than two independent runner
  processes have timed (recorded results; `repeats/` files are not recorded). A latency
  verdict should rest on two processes at least.
- `first`: the 2026-11-29 batch: the example workload and, for rope, rms_norm and swiglu,
  one workload of that CI run.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def runner_supports(run) -> bool:
    from kirunner.kernels import get_spec

    try:
        spec = get_spec(run.benchmark.slug)
    except Exception:
        return False
    return run.implementation.provider_key in spec.providers


def example_workload(runs):
    """The example page's llama4_rope workload (H100 rows of liger-kernel-bench)."""
    return runs.filter(
        source__slug="liger-kernel-bench",
        benchmark__slug="llama4_rope",
        sweep_name="seq",
        workload__parameters__seq=4096,
        environment__gpu__upstream_name="NVIDIA H100 80GB HBM3",
        implementation__provider_key__in=["huggingface", "liger"],
    ).order_by("timed_pass", "metric", "implementation__provider_key")


def selected_all_h200():
    from runs.models import Run

    runs = Run.objects.public().with_related()
    yield from example_workload(runs)
    h200 = runs.filter(
        source__slug="liger-kernel-ci", environment__gpu__upstream_name="NVIDIA H200"
    )
    latest = h200.order_by("-publication__sequence").values_list("publication", flat=True).first()
    cells = h200.filter(publication=latest).order_by(
        "benchmark__slug", "timed_pass", "metric", "workload__label", "implementation__provider_key"
    )
    yield from (run for run in cells if runner_supports(run))


def selected_unjudged_h200():
    """The rows of `all-h200` that carry no verdict yet (evidence still `reported`)."""
    from runs.models import Evidence

    yield from (run for run in selected_all_h200() if run.evidence == Evidence.REPORTED)


def selected_one_process_h200():
    """The latency rows of `all-h200` timed by fewer than two runner processes."""
    from runs.models import EvidenceEvent

    runs = [run for run in selected_all_h200() if run.metric == "latency"]
    processes = defaultdict(set)
    events = EvidenceEvent.objects.filter(run__in=runs, controlled_run__isnull=False)
    for run_id, pk, process in events.values_list("run_id", "pk", "facts__process"):
        # Results of runners before process ids: each was its own batch's process.
        processes[run_id].add(process or f"event {pk}")
    yield from (run for run in runs if len(processes[run.pk]) < 2)


def interleaved(runs):
    """The runs round-robin over kernel, each kernel's in their order, so that a batch cut
    short by its budget still covers every kernel."""
    by_kernel = defaultdict(list)
    for run in runs:
        by_kernel[run.benchmark.slug].append(run)
    queues = list(by_kernel.values())
    for i in range(max((len(q) for q in queues), default=0)):
        yield from (q[i] for q in queues if i < len(q))


def selected_first():
    from runs.models import Run

    runs = Run.objects.public().with_related()
    yield from example_workload(runs).exclude(timed_pass="forward", metric="memory")

    h200 = runs.filter(
        source__slug="liger-kernel-ci",
        environment__gpu__upstream_name="NVIDIA H200",
        implementation__provider_key__in=["huggingface", "liger"],
        timed_pass__in=["forward", "full"],
        metric="latency",
    )
    latest = h200.order_by("-publication__sequence").values_list("publication", flat=True).first()
    cells = {
        "rope": {"sweep_name": "seq", "workload__parameters__seq": 4096},
        "rms_norm": {"workload__parameters__hidden": 4096},
        "swiglu": {"workload__parameters__seq": 4096},
    }
    for benchmark, where in cells.items():
        yield from h200.filter(publication=latest, benchmark__slug=benchmark, **where).order_by(
            "timed_pass", "implementation__provider_key"
        )


SELECTIONS = {
    "all-h200": selected_all_h200,
    "unjudged-h200": selected_unjudged_h200,
    "one-process-h200": selected_one_process_h200,
    "first": selected_first,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--gpu-class", default="h200")
    parser.add_argument(
        "--selection", choices=sorted(SELECTIONS), default="all-h200", help="see the docstring"
    )
    parser.add_argument("--kernels", default="", help="comma-separated benchmark slugs only")
    parser.add_argument(
        "--interleave", action="store_true", help="round-robin over kernel (see interleaved)"
    )
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
    import django

    django.setup()
    args.out.mkdir(parents=True, exist_ok=True)
    from reruns.controlled import job_document
    from reruns.models import RerunJob

    issued_at = datetime.now(UTC)
    selected = SELECTIONS[args.selection]()
    if args.kernels:
        wanted = set(args.kernels.split(","))
        selected = (run for run in selected if run.benchmark.slug in wanted)
    if args.interleave:
        selected = interleaved(selected)
    width = 2 if args.selection == "first" else 4
    for n, run in enumerate(selected, start=1):
        # An unsaved job: `rerun load-demo` creates the row from the file, with this uuid and
        # nonce, once the results come back.
        job = RerunJob(run=run, gpu_class=args.gpu_class, nonce=secrets.token_hex(16),
                       uuid=uuid.uuid4(), issued_at=issued_at)  # fmt: skip
        doc = job_document(job)
        name = f"{n:0{width}d}-{run.benchmark.slug}-{run.timed_pass}-{run.metric}-{run.implementation.provider_key}.json"
        (args.out / name).write_text(json.dumps(doc, indent=2) + "\n")
        print(name, run.public_id, run.workload.label)


if __name__ == "__main__":
    main()

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

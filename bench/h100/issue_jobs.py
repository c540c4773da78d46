"""Issue the job files of a controlled H100 rerun batch: rows of one Liger-Kernel CI commit.

    .venv/bin/python bench/h100/issue_jobs.py --commit ab7fe2a \
        --kernels rms_norm,layer_norm,softmax --out data/reruns/h100-2026-12-05/jobs

Writes one RerunJob document per selected run with the server's own `job_document`, as
bench/h200/issue_jobs.py does for the H200 rows of 02bac05: every row of the commit's
publication measured on an NVIDIA H100 80GB HBM3 (or the GPU product --gpu names) for the
kernels named (default: every kernel the runner supports), every pass, metric and provider
the runner supports, the kernels round-robin (a batch cut short still covers each one), each
kernel's rows by metric, pass, workload and provider (a cell's providers one after the other).
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "h200"))

from issue_jobs import interleaved, runner_supports  # noqa: E402  (bench/h200/issue_jobs.py)

GPU = "NVIDIA H100 80GB HBM3"


def selected(commit: str, kernels: set[str], gpu: str = GPU):
    from runs.models import Run

    runs = (
        Run.objects.public()
        .with_related()
        .filter(
            source__slug="liger-kernel-ci",
            environment__gpu__upstream_name=gpu,
            publication__upstream_commit__startswith=commit,
        )
        .order_by(
            "benchmark__slug",
            "metric",
            "timed_pass",
            "workload__label",
            "implementation__provider_key",
        )  # fmt: skip
    )
    for run in runs:
        if kernels and run.benchmark.slug not in kernels:
            continue
        if runner_supports(run):
            yield run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--commit", default="ab7fe2a")
    parser.add_argument("--kernels", default="", help="comma-separated benchmark slugs only")
    parser.add_argument("--start", type=int, default=1, help="number of the first file")
    parser.add_argument("--gpu-class", default="h100")
    parser.add_argument("--gpu", default=GPU, help="the rows of this GPU product (upstream's name)")
    parser.add_argument("--again", nargs="+", type=Path, default=[],
                        help="job files to issue again (same file names, new ids and nonces)")  # fmt: skip
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
    import django

    django.setup()
    from kirunner.runner import JobError, validate_job
    from reruns.controlled import job_document
    from reruns.models import RerunJob
    from runs.models import Run

    args.out.mkdir(parents=True, exist_ok=True)
    issued_at = datetime.now(UTC)

    def issue(run) -> dict | None:
        # An unsaved job: `rerun load-demo` creates the row from the file once results exist.
        job = RerunJob(run=run, gpu_class=args.gpu_class, nonce=secrets.token_hex(16),
                       uuid=uuid.uuid4(), issued_at=issued_at)  # fmt: skip
        doc = job_document(job)
        try:
            validate_job(doc)
        except JobError as exc:  # e.g. the no-grad-forward pass, which the runner lacks
            print(f"skipped {run.public_id}: {exc}", file=sys.stderr)
            return None
        return doc

    # Jobs measured again after a runner fix: the same runs and file names, the job document
    # as the server issues it now (bench/h100/collect.py --replace files their results).
    for path in args.again:
        old = json.loads(path.read_text())
        doc = issue(Run.objects.get(public_id=old["run"]["publicId"]))
        if doc is not None:
            (args.out / path.name).write_text(json.dumps(doc, indent=2) + "\n")
            print(path.name, "issued again")
    if args.again:
        return
    kernels = {k for k in args.kernels.split(",") if k}
    n = args.start - 1
    for run in interleaved(selected(args.commit, kernels, args.gpu)):
        if (doc := issue(run)) is None:
            continue
        n += 1
        name = (
            f"{n:04d}-{run.benchmark.slug}-{run.timed_pass}-{run.metric}-"
            f"{run.implementation.provider_key}.json"
        )
        (args.out / name).write_text(json.dumps(doc, indent=2) + "\n")
        print(name, run.public_id, run.workload.label)


if __name__ == "__main__":
    main()

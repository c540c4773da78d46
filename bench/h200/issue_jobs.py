"""Issue the job files of the first controlled H200 rerun batch from the runs in the database.

    .venv/bin/python bench/h200/issue_jobs.py --out data/reruns/h200-2026-11-29/jobs

Writes one RerunJob document per selected run, in the shape `manage.py rerun export` writes
(fresh UUID and nonce each). `manage.py rerun load-demo` later creates the job rows from these
files and records the signed results that the GPU host returned for them.
Selection: the example page's llama4_rope workload (H100 rows of liger-kernel-bench) and, for
rope, rms_norm and swiglu, one workload of the latest upstream CI run that has NVIDIA H200 rows.
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


def job_document(run, gpu_class: str, issued_at: str) -> dict:
    liger_version = run.labels.get("liger_version", "")
    return {
        "apiVersion": "kernelindex.dev/v1alpha1",
        "kind": "RerunJob",
        "job": {
            "id": str(uuid.uuid4()),
            "nonce": secrets.token_hex(16),
            "issuedAt": issued_at,
            "gpuClass": gpu_class,
        },
        "run": {
            "publicId": run.public_id,
            "source": run.source.slug,
            "externalId": run.external_id,
            "digest": run.digest,
        },
        "benchmark": run.benchmark.slug,
        "pass": run.timed_pass,
        "metric": run.metric,
        "provider": run.implementation.provider_key,
        "implementation": {
            "project": run.implementation.project.name,
            "revision": run.implementation.revision,
        },
        "workload": {"parameters": run.workload.parameters},
        "protocol": {
            "family": run.protocol.family,
            "harness": run.source.slug,
            "quantiles": [0.5, 0.2, 0.8],
            # No "rep": the runner then uses the rep of the upstream script for this kernel
            # (400 ms for rope, 500 for rms_norm, 10 for swiglu), as upstream measured it.
            "ligerVersion": liger_version,
        },
    }


def selected_runs():
    from runs.models import Run

    runs = Run.objects.public().with_related()
    example = runs.filter(
        source__slug="liger-kernel-bench",
        benchmark__slug="llama4_rope",
        sweep_name="seq",
        workload__parameters__seq=4096,
        environment__gpu__upstream_name="NVIDIA H100 80GB HBM3",
        implementation__provider_key__in=["huggingface", "liger"],
    ).exclude(timed_pass="forward", metric="memory")
    yield from example.order_by("timed_pass", "metric", "implementation__provider_key")

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--gpu-class", default="h200")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
    import django

    django.setup()
    args.out.mkdir(parents=True, exist_ok=True)
    issued_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for n, run in enumerate(selected_runs(), start=1):
        doc = job_document(run, args.gpu_class, issued_at)
        name = f"{n:02d}-{run.benchmark.slug}-{run.timed_pass}-{run.metric}-{run.implementation.provider_key}.json"
        (args.out / name).write_text(json.dumps(doc, indent=2) + "\n")
        print(name, run.public_id, run.workload.label)


if __name__ == "__main__":
    main()

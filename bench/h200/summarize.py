"""Print a batch's H200 medians beside the upstream figures, with the spread of repeats.

    DATABASE_URL=... .venv/bin/python bench/h200/summarize.py data/reruns/h200-2026-11-29

Needs a database with both Liger sources and the batch loaded (`manage.py demo --no-serve`).
Spread is (max - min) / min over the repeated runs' medians.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main(folder: Path) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
    import django

    django.setup()
    from runs.models import EvidenceEvent, Run

    print(
        f"{'job':44} {'GPU upstream':22} {'upstream':>10} {'H200 runs':>28} {'spread':>7}  evidence"
    )
    for job_path in sorted((folder / "jobs").glob("*.json")):
        job = json.loads(job_path.read_text())
        name = job_path.stem
        medians, used = [], set()
        for path in [
            folder / "results" / f"{name}.json",
            *sorted((folder / "repeats").glob(f"{name}.run*.json")),
        ]:
            payload = json.loads(path.read_text())["payload"]
            medians.append(payload["measurement"]["median"])
            used.add(payload["implementation"].get("usedRevision"))
        run = (
            Run.objects.public()
            .select_related("environment__gpu")
            .get(source__slug=job["run"]["source"], external_id=job["run"]["externalId"])
        )
        scale, unit = (1e3, "us") if run.metric == "latency" else (1.0, "MiB")
        upstream = run.median / 1e3 if run.metric == "latency" else run.median / 2**20
        event = EvidenceEvent.objects.filter(run=run).order_by("-created_at").first()
        runs = ", ".join(f"{m * scale:.1f}" for m in medians)
        spread = (max(medians) - min(medians)) / min(medians) if len(medians) > 1 else None
        print(
            f"{name:44} {run.environment.gpu.upstream_name:22} {upstream:8.1f}{unit:>3} "
            f"{runs:>28} {'' if spread is None else f'{spread:6.1%}':>7}  "
            f"{event.to_level if event else '-'} (impl {', '.join(sorted(map(str, used)))})"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]))

"""Verdict counts per kernel for one commit's H100 rows of Liger-Kernel CI, as the database holds them.

    DATABASE_URL=... .venv/bin/python bench/h100/verdicts.py --commit ab7fe2a [--reasons]

Prints, per kernel, the rows the publication has, and how many are reproduced, not-reproduced,
checked, incorrect or still reported (no verdict: no result loaded). `--reasons` groups the
`checked` rows by the first clause of the latest evidence event's reason.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

GPU = "NVIDIA H100 80GB HBM3"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commit", default="ab7fe2a")
    ap.add_argument("--reasons", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
    import django

    django.setup()
    from runs.models import EvidenceEvent, Run

    runs = Run.objects.public().filter(
        source__slug="liger-kernel-ci",
        environment__gpu__upstream_name=GPU,
        publication__upstream_commit__startswith=args.commit,
    )
    levels = ["reproduced", "not-reproduced", "checked", "incorrect", "reported"]
    table: dict[str, Counter] = defaultdict(Counter)
    for slug, level in runs.values_list("benchmark__slug", "evidence"):
        table[slug][level] += 1
    print(f"{'kernel':32} {'rows':>5} " + " ".join(f"{lv:>14}" for lv in levels))
    total = Counter()
    for slug in sorted(table):
        c = table[slug]
        total.update(c)
        print(f"{slug:32} {sum(c.values()):5d} " + " ".join(f"{c[lv]:14d}" for lv in levels))
    print(f"{'all':32} {sum(total.values()):5d} " + " ".join(f"{total[lv]:14d}" for lv in levels))
    if args.reasons:
        why: dict[str, Counter] = defaultdict(Counter)
        checked = runs.filter(evidence="checked")
        latest = {}
        for run_id, facts in (
            EvidenceEvent.objects.filter(run__in=checked)
            .order_by("run_id", "pk")
            .values_list("run_id", "facts")
        ):
            latest[run_id] = facts or {}
        for run_id, slug in checked.values_list("pk", "benchmark__slug"):
            text = str(latest.get(run_id, {}).get("why", "")) or "(no reason recorded)"
            head = text.split(":")[0].split(" (")[0]
            why[slug][re.sub(r"\d+(\.\d+)?", "N", head)[:90]] += 1
        for slug in sorted(why):
            for reason, n in why[slug].most_common():
                print(f"checked {slug}: {n} {reason}")


if __name__ == "__main__":
    main()

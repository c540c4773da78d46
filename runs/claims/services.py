"""Judge every claim whose two sides a controlled rerun re-measured in one runner process.

Reads only the evidence events (their facts hold the controlled figures, the tolerance the
verdict used, the GPU product and the runner process), never a result's samples. Called for
one comparison group whenever an event of one of its runs is written (runs/claims/signals.py), and
for everything by `manage.py claims judge`.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations

from django.db import transaction

from runs.claims import rule
from runs.claims.models import JudgedClaim
from runs.evidence import TOLERANCE_CEILING
from runs.models import Evidence, EvidenceEvent


def _number(value) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _side(row: dict, process: str | None) -> rule.Side:
    facts = row["facts"] if process is None else row["by_process"][process]["facts"]
    return rule.Side(
        published=row["median"],
        published_product=row["product"],
        tolerance=_number(facts.get("tolerance")) or float("inf"),
        controlled_product=facts.get("gpuProduct"),
        process=process,
        do_bench=_number(facts.get("measured")),
        device=_number(facts.get("deviceNs")),
        device_bound=(facts.get("classification") or {}).get("kind") == "device-bound",
        withheld=facts.get("why", "") if facts.get("withheld") else "",
    )


def _rows(group_ids) -> dict[int, dict[int, dict]]:
    """group -> run -> its published figure and, per runner process, its latest event."""
    events = EvidenceEvent.objects.filter(controlled_run__isnull=False).exclude(
        outcome=Evidence.INCORRECT
    )
    if group_ids is not None:
        events = events.filter(run__group_id__in=group_ids)
    groups: dict[int, dict[int, dict]] = defaultdict(dict)
    for e in events.order_by("created_at", "id").values(
        "run_id",
        "run__group_id",
        "run__source_id",
        "run__median",
        "run__metric",
        "run__environment__gpu__product",
        "run__implementation__display_name",
        "controlled_run_id",
        "facts",
    ):
        process = (e["facts"] or {}).get("process")
        if e["run__group_id"] is None or not process or not e["run__median"]:
            continue
        row = groups[e["run__group_id"]].setdefault(
            e["run_id"],
            {
                "median": float(e["run__median"]),
                "metric": e["run__metric"],
                "product": e["run__environment__gpu__product"],
                "source": e["run__source_id"],
                "name": e["run__implementation__display_name"],
                "by_process": {},
            },
        )
        row["by_process"][process] = {"facts": e["facts"], "controlled": e["controlled_run_id"]}
    return groups


def claims_judge(group_ids: list[int] | None = None) -> dict[str, int]:
    """Recompute the judged claims of these groups (all when None); returns counts by verdict."""
    counts: dict[str, int] = defaultdict(int)
    with transaction.atomic():
        stale = JudgedClaim.objects.all()
        if group_ids is not None:
            stale = stale.filter(group_id__in=group_ids)
        stale.delete()
        fresh = []
        for group_id, runs in _rows(group_ids).items():
            for a, b in combinations(sorted(runs), 2):
                fresh += _judge_pair(group_id, a, runs[a], b, runs[b], counts)
        JudgedClaim.objects.bulk_create(fresh)
    return dict(counts)


def _judge_pair(group_id: int, a: int, ra: dict, b: int, rb: dict, counts) -> list[JudgedClaim]:
    common = [p for p in ra["by_process"] if p in rb["by_process"]]
    if not common:
        counts["one side missing or another process"] += 1
        return []
    process = common[-1]  # the latest process that re-measured both
    (better, rbetter), (other, rother) = sorted(((a, ra), (b, rb)), key=lambda x: x[1]["median"])
    result = rule.judge(
        _side(rbetter, process),
        _side(rother, process),
        metric=rbetter["metric"],
        ceiling=TOLERANCE_CEILING,
        names=(rbetter["name"], rother["name"]),
    )
    if isinstance(result, rule.Refused):
        counts["refused"] += 1
        return []
    counts[result.verdict] += 1
    return [
        JudgedClaim(
            source_id=rbetter["source"],
            group_id=group_id,
            better_id=better,
            other_id=other,
            better_controlled_id=rbetter["by_process"][process]["controlled"],
            other_controlled_id=rother["by_process"][process]["controlled"],
            verdict=result.verdict,
            severity=rule.SEVERITY[result.verdict],
            published_ratio=result.published_ratio,
            controlled_ratio=result.controlled_ratio,
            device_ratio=result.device_ratio,
            tolerance=result.tolerance,
            basis=result.basis,
            process=process,
            why=result.why,
        )
    ]

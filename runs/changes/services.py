"""The one writer of CellSeries and CellChange: the change rule run over the cells that some
publications touched, their rows replaced, and the publications' groups recomputed.

1. Read every current run of the source whose comparison cell appears in those publications
   (one query), and put each cell's points in the order the run page draws them.
2. Judge each cell (runs.changes.detect); its tolerance is stored for the pages, the rule
   takes its threshold from the points before each change only.
3. In one transaction: delete those cells' rows, insert the new ones, and recompute the
   `grouped` flag of every publication that has a change among them.

Idempotent: the same runs give the same rows, so running it twice, or after an unchanged sync,
changes nothing; what it reports as `new_steps` are steps that were not steps before, which is
what notices are sent for.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from runs.changes import detect
from runs.changes.models import CellChange, CellSeries, ChangeReview
from runs.evidence import cell_tolerance
from runs.models import ComparisonGroup, Publication, Run, Source
from runs.signals import change_reviewed, publications_ingested

# Sources whose publications are not a history: KernelIndex's own controlled reruns.
NO_HISTORY = {"kernelindex"}

_FIELDS = (
    "id", "group__cell_key", "implementation__provider_key", "publication_id", "observed_at",
    "publication__sequence", "median", "benchmark_id", "benchmark__slug", "timed_pass",
    "metric", "workload__slug", "environment__gpu__upstream_name", "publication__published_at",
)  # fmt: skip


@dataclass
class DetectReport:
    cells: int = 0
    changes: int = 0
    # Ids of CellChange rows that are steps and were not before this run (for notices).
    new_steps: list[int] = field(default_factory=list)
    publications: list[int] = field(default_factory=list)


def changes_detect(
    *, source: Source, publications: list[Publication] | None = None
) -> DetectReport:
    """Judge the cells these publications touched (every cell of the source when None)."""
    report = DetectReport()
    if source.slug in NO_HISTORY:
        return report
    groups = ComparisonGroup.objects.filter(publication__source=source)
    if publications is not None:
        groups = groups.filter(publication__in=publications)
    keys = groups.values("cell_key")
    # No ORDER BY: the points are put in order per cell below.
    rows = (
        Run.objects.public()
        .filter(source=source, group__cell_key__in=keys)
        .order_by()
        .values_list(*_FIELDS)
    )
    cells: dict[tuple, list[tuple]] = defaultdict(list)
    for row in rows:
        cells[row[1], row[2]].append(row)
    series, changes = [], []
    for (cell_key, provider), points in cells.items():
        judged = _judge(source, cell_key, provider, points)
        if judged is not None:
            series.append(judged[0])
            changes.extend(judged[1])
    with transaction.atomic():
        existing = CellChange.objects.filter(source=source, cell_key__in=keys)
        before = {
            (cell_key, provider, pub): kind
            for cell_key, provider, pub, kind in existing.values_list(
                "cell_key", "provider_key", "publication_id", "kind"
            )
        }
        existing.delete()
        # A maintainer's review is of the point, whatever row the rule writes there now.
        reviews = {
            (cell_key, provider, pub): state
            for cell_key, provider, pub, state in ChangeReview.objects.filter(
                source=source, cell_key__in=keys
            ).values_list("cell_key", "provider_key", "publication_id", "state")
        }
        for c in changes:
            c.review = reviews.get((c.cell_key, c.provider_key, c.publication_id), "")
        CellSeries.objects.filter(source=source, cell_key__in=keys).delete()
        CellSeries.objects.bulk_create(series, batch_size=2000)
        CellChange.objects.bulk_create(changes, batch_size=2000)
        touched_pubs = sorted({c.publication_id for c in changes} | {k[2] for k in before})
        _regroup(touched_pubs)
        steps = CellChange.objects.filter(source=source, cell_key__in=keys, kind=CellChange.STEP)
        report.new_steps = [
            pk
            for pk, *point in steps.values_list("id", "cell_key", "provider_key", "publication_id")
            if before.get(tuple(point)) != CellChange.STEP
        ]
    report.cells, report.changes, report.publications = len(series), len(changes), touched_pubs
    return report


def changes_detect_after_ingest(
    *, source: Source, reports: list, trigger: str = "command"
) -> DetectReport:
    """changes_detect for the publications whose files created or revised runs (an unchanged
    file touches nothing), then runs.signals.publications_ingested once, after commit."""
    slugs = {r.publication for r in reports if r.created or r.revised}
    if not slugs:
        return DetectReport()
    publications = list(Publication.objects.filter(source=source, slug__in=slugs))
    report = changes_detect(source=source, publications=publications)
    announce = {
        "source_id": source.pk,
        "publication_ids": sorted(p.pk for p in publications),
        "step_ids": report.new_steps,
        "trigger": trigger,
    }
    transaction.on_commit(lambda: publications_ingested.send(sender=Source, **announce))
    return report


def _judge(source: Source, cell_key: str, provider: str, points: list[tuple]):
    """(CellSeries, [CellChange]) of one cell, or None for a cell too short to store."""
    by_pub: dict[int, list[tuple]] = defaultdict(list)
    for row in points:
        by_pub[row[3]].append(row)
    # One point per publication (its median if a cell was measured twice), in page order.
    ordered = sorted(by_pub.values(), key=lambda rs: (min(r[4] for r in rs), rs[0][5], rs[0][3]))
    if len(ordered) <= detect.MIN_BASELINE:
        return None
    values = [statistics.median(r[6] for r in rs) for rs in ordered]
    first = ordered[0][0]
    bench_id, bench, timed_pass, metric, workload, gpu = first[7:13]
    tolerance = cell_tolerance(
        source_slug=source.slug, cell=(bench, timed_pass, metric, provider, workload, gpu)
    ).value
    verdict = detect.detect(values, metric=metric)
    series = CellSeries(
        source=source, cell_key=cell_key, provider_key=provider, benchmark_id=bench_id,
        status=verdict.status, points=len(values), tolerance=tolerance,
    )  # fmt: skip
    changes = [
        CellChange(
            source=source,
            publication_id=ordered[c.index][0][3],
            previous_id=ordered[c.index - 1][0][3],
            cell_key=cell_key,
            provider_key=provider,
            benchmark_id=bench_id,
            run_id=ordered[c.index][0][0],
            kind=c.kind,
            direction=c.direction,
            until_id=ordered[c.until][0][3] if c.until is not None else None,
            before=c.before,
            after=c.after,
            threshold=c.threshold,
            published_at=ordered[c.index][0][13],
        )  # fmt: skip
        for c in verdict.changes
    ]
    return series, changes


def _regroup(publication_ids: list[int]) -> None:
    """Set `grouped` on every change of these publications that moved with many others
    (detect.grouped: the same kind and direction at one publication)."""
    if not publication_ids:
        return
    moved: dict[tuple, list[int]] = defaultdict(list)
    rows = CellChange.objects.filter(publication_id__in=publication_ids).values_list(
        "publication_id", "kind", "direction", "benchmark_id"
    )
    for pub, kind, direction, bench in rows:
        moved[pub, kind, direction].append(bench)
    together = Q(pk__in=[])
    for (pub, kind, direction), benches in moved.items():
        if detect.grouped([str(b) for b in benches]):
            together |= Q(publication_id=pub, kind=kind, direction=direction)
    scope = CellChange.objects.filter(publication_id__in=publication_ids)
    scope.update(grouped=False, group_shift=None, group_cells=0)
    scope.filter(together).update(grouped=True)
    _suite_moves(scope.filter(together))


def _suite_moves(grouped) -> None:
    """Each group's move over every cell of its kernels, not only its own cells: the median
    of median(publication) / median(previous) - 1 over the cells with a run at both, the
    previous being the publication most of the group's cells moved from. One query of those
    publications' runs of those kernels."""
    groups: dict[tuple, dict] = defaultdict(lambda: {"benches": set(), "previous": Counter()})
    for pub, kind, direction, bench, previous in grouped.values_list(
        "publication_id", "kind", "direction", "benchmark_id", "previous_id"
    ):
        groups[pub, kind, direction]["benches"].add(bench)
        groups[pub, kind, direction]["previous"][previous] += 1
    if not groups:
        return
    for g in groups.values():
        g["from"] = g["previous"].most_common(1)[0][0]
    medians: dict[int, dict[tuple, int]] = defaultdict(dict)
    rows = (
        Run.objects.public()
        .filter(
            publication_id__in={p for (p, _, _), g in groups.items() for p in (p, g["from"])},
            benchmark_id__in=set().union(*(g["benches"] for g in groups.values())),
        )
        .order_by()
        .values_list("publication_id", "benchmark_id", "history_key", "median")
    )
    for pub, bench, key, median in rows:
        medians[pub][bench, key] = median
    for (pub, kind, direction), g in groups.items():
        before = medians[g["from"]]
        shifts = [
            m / before[k] - 1
            for k, m in medians[pub].items()
            if k[0] in g["benches"] and before.get(k)
        ]
        if shifts:
            grouped.filter(publication_id=pub, kind=kind, direction=direction).update(
                group_shift=statistics.median(shifts), group_cells=len(shifts)
            )


def changes_review(*, changes, reviewer, state: str, reason: str) -> int:
    """A maintainer acknowledges or dismisses these changes: each point's ChangeReview (made
    or moved), its rows' copy of the state, and a moderation event per point that moved
    (runs.signals.change_reviewed, received in this transaction so the trail and the review
    commit together). How many points moved; one already in `state` is left as it was."""
    if not getattr(reviewer, "is_staff", False):
        raise PermissionDenied("Only a maintainer reviews changes.")
    if state not in (ChangeReview.ACKNOWLEDGED, ChangeReview.DISMISSED):
        raise ValidationError(f"A review acknowledges or dismisses, not {state!r}.")
    reason = reason.strip()
    if state == ChangeReview.DISMISSED and not reason:
        raise ValidationError("Say why the change is dismissed: the reason is kept in the trail.")
    moved = 0
    with transaction.atomic():
        points = changes.values_list("source_id", "cell_key", "provider_key", "publication_id")
        for source_id, cell_key, provider_key, publication_id in points.order_by().distinct():
            point = {"source_id": source_id, "cell_key": cell_key,
                     "provider_key": provider_key, "publication_id": publication_id}  # fmt: skip
            review = ChangeReview.objects.select_for_update().filter(**point).first()
            if review is not None and review.state == state:
                continue
            before = review.state if review is not None else ""
            review, _ = ChangeReview.objects.update_or_create(
                **point,
                defaults={"state": state, "reason": reason, "reviewed_by": reviewer,
                          "reviewed_at": timezone.now()},
            )  # fmt: skip
            CellChange.objects.filter(**point).update(review=state)
            change_reviewed.send(
                sender=ChangeReview, review_id=review.pk, actor_id=reviewer.pk,
                from_state=before, to_state=state, reason=reason,
            )  # fmt: skip
            moved += 1
    return moved

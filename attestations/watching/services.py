"""Writes of watching: start, change and stop a watch; turn what runs announced into notices
and send them.

Notices, for one announcement (a sync's publications and new steps, one evidence move, one
moderation's approvals):
1. Find the watches that want to hear of it and write one Notice per user and subject
   (bulk, ignoring conflicts: a subject a user was already told about is skipped), all
   carrying the announcement's batch id.
2. Per user with unsent notices in the batch, claim them with a conditional UPDATE
   (`sent_at IS NULL`); a user whose claim got no rows was served by another delivery.
3. Send that user one email with every line of the batch and an unsubscribe link per watch.
Repeating any step, or the whole task, sends nothing twice.
"""

from __future__ import annotations

import uuid

from django.core import signing
from django.core.mail import EmailMessage
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from attestations.models import Attestation
from attestations.watching.models import Notice, Watch
from kilib.origin import site_root
from runs.changes.models import CellChange
from runs.models import ComparisonGroup, EvidenceEvent, Publication, Source
from runs.pages.units import scale

UNSUBSCRIBE_SALT = "kernelindex.watching.unsubscribe"
# Lines in one email; the rest are counted, with a link to the pages that list them.
EMAIL_LINES = 60


class WatchError(ValueError):
    """A watch that cannot be started as asked; the message says why."""


def watch_start(*, user, target: str, benchmark=None, source=None, run=None, events: dict) -> Watch:
    """Watch a benchmark, a source or the cell of a run; watching it again updates the choice."""
    if not user.is_authenticated:
        raise WatchError("Sign in to watch.")
    if target == Watch.Target.BENCHMARK and benchmark is not None:
        lookup = {"benchmark": benchmark}
    elif target == Watch.Target.SOURCE and source is not None:
        lookup = {"source": source}
    elif target == Watch.Target.CELL and run is not None:
        lookup = {"cell_key": run.group.cell_key, "provider_key": run.implementation.provider_key}
    else:
        raise WatchError("Name a benchmark, a source or a run whose cell to watch.")
    chosen = {name: bool(events.get(name)) for name in Watch.EVENTS}
    if not any(chosen.values()):
        raise WatchError("Choose at least one thing to hear about.")
    defaults = {**chosen, "run": run} if run is not None else chosen
    watch, _ = Watch.objects.update_or_create(user=user, target=target, **lookup, defaults=defaults)
    return watch


def watch_stop(*, watch: Watch, user) -> None:
    if watch.user_id != user.pk:
        raise WatchError("Not your watch.")
    watch.delete()


def unsubscribe_token(*, user, watch: Watch | None = None) -> str:
    """A signed token that stops one watch (or all of a user's, watch None) without a login."""
    return signing.dumps({"u": user.pk, "w": watch.pk if watch else None}, salt=UNSUBSCRIBE_SALT)


def unsubscribe(*, token: str) -> int:
    """Stop what the token names; how many watches stopped. A tampered token raises
    signing.BadSignature."""
    data = signing.loads(token, salt=UNSUBSCRIBE_SALT)
    watches = Watch.objects.filter(user_id=data["u"])
    if data.get("w") is not None:
        watches = watches.filter(pk=data["w"])
    deleted, _ = watches.delete()
    return deleted


def _watchers(*, source_ids, benchmark_ids, cells) -> list[Watch]:
    """Every watch of these sources, of these benchmarks, or of these (cell, provider) pairs."""
    cell_keys = {c for c, _ in cells}
    wanted = Q(target=Watch.Target.SOURCE, source_id__in=list(source_ids))
    wanted |= Q(target=Watch.Target.BENCHMARK, benchmark_id__in=list(benchmark_ids))
    wanted |= Q(target=Watch.Target.CELL, cell_key__in=list(cell_keys))
    found = Watch.objects.filter(wanted).select_related("user", "benchmark", "source", "run")
    return [
        w for w in found if w.target != Watch.Target.CELL or (w.cell_key, w.provider_key) in cells
    ]


def _matches(watch: Watch, *, source_id: int, benchmark_id: int, cell: tuple) -> bool:
    if watch.target == Watch.Target.SOURCE:
        return watch.source_id == source_id
    if watch.target == Watch.Target.BENCHMARK:
        return watch.benchmark_id == benchmark_id
    return (watch.cell_key, watch.provider_key) == cell


def notices_for_sync(
    *, batch: str, source_id: int, publication_ids: list[int], step_ids: list[int]
) -> int:
    """Notices of new publications and of the new steps among them; emails sent."""
    source = Source.objects.get(pk=source_id)
    publications = list(Publication.objects.filter(pk__in=publication_ids))
    touched = list(
        ComparisonGroup.objects.filter(publication__in=publications)
        .values_list("publication_id", "benchmark_id", "cell_key")
        .distinct()
    )
    # A change a maintainer dismissed (before a re-detection made it new again) is not sent.
    steps = list(CellChange.objects.filter(pk__in=step_ids).alarmed().with_related())
    # A cell watch hears of a publication that has its cell, whatever the provider.
    cells_in = {(pub, key) for pub, _, key in touched}
    benchmarks_in = {(pub, bench) for pub, bench, _ in touched}
    cells = {(c.cell_key, c.provider_key) for c in steps}
    watched_cells = set(
        Watch.objects.filter(
            target=Watch.Target.CELL, cell_key__in={k for _, _, k in touched}
        ).values_list("cell_key", "provider_key")
    )
    watches = _watchers(
        source_ids={source_id},
        benchmark_ids={b for _, b in benchmarks_in} | {c.benchmark_id for c in steps},
        cells=cells | watched_cells,
    )
    notices = []
    for watch in watches:
        for pub in publications if watch.publications else ():
            if _has_publication(watch, pub, source_id, cells_in, benchmarks_in):
                notices.append(_publication_notice(watch, batch, source, pub))
        for change in steps:
            wanted = watch.regressions if change.direction == "regression" else watch.improvements
            if not wanted:
                continue
            if _matches(watch, source_id=change.source_id, benchmark_id=change.benchmark_id,
                        cell=(change.cell_key, change.provider_key)):  # fmt: skip
                notices.append(_change_notice(watch, batch, change))
    return _deliver(batch, notices)


def _has_publication(watch, pub, source_id, cells_in, benchmarks_in) -> bool:
    if watch.target == Watch.Target.SOURCE:
        return watch.source_id == source_id
    if watch.target == Watch.Target.BENCHMARK:
        return (pub.pk, watch.benchmark_id) in benchmarks_in
    return (pub.pk, watch.cell_key) in cells_in


def _publication_notice(watch: Watch, batch: str, source: Source, pub: Publication) -> Notice:
    return Notice(
        user=watch.user, watch=watch, batch=batch, key=f"publication:{pub.pk}",
        line=f"New publication {pub.slug} of {source.name}",
        url=reverse("runs:source-changes", args=[source.slug]),
    )  # fmt: skip


def _change_notice(watch: Watch, batch: str, c: CellChange) -> Notice:
    run = c.run
    host = " (moved with many cells of several kernels: likely the benchmark host)"
    line = (
        f"{c.direction.capitalize()} {c.shift_text} at {c.publication.slug}: "
        f"{c.benchmark.title} · {run.implementation.display_name} · {run.timed_pass} · "
        f"{run.metric} · {run.workload.label} · {run.environment.gpu.product}: "
        f"{scale(c.before, run.unit)} → {scale(c.after, run.unit)}"
        f"{host if c.grouped else ''}"
    )
    key = f"change:{c.source_id}:{c.cell_key}:{c.provider_key}:{c.publication_id}:{c.direction}"
    return Notice(
        user=watch.user, watch=watch, batch=batch, key=key, line=line,
        url=run.get_absolute_url() + "#history",
    )  # fmt: skip


def notices_for_evidence(*, event_id: int) -> int:
    """Notices of one moved evidence level, to those watching the run's cell, benchmark or
    source."""
    # A batch of reruns moves thousands of levels, mostly with nobody watching evidence: one
    # query then instead of the event, its run and the watch lookup (the demo load did those
    # 4,369 times).
    if not Watch.objects.filter(evidence=True).exists():
        return 0
    event = EvidenceEvent.objects.select_related(
        "run__group", "run__implementation", "run__source", "run__benchmark"
    ).get(pk=event_id)
    run = event.run
    cell = (run.group.cell_key, run.implementation.provider_key)
    watches = _watchers(source_ids={run.source_id}, benchmark_ids={run.benchmark_id}, cells={cell})
    batch = f"evidence:{event.pk}"
    notices = [
        Notice(
            user=w.user,
            watch=w,
            batch=batch,
            key=batch,
            line=f"Run {run.public_id} ({run.title}): evidence {event.from_level} → "
            f"{event.to_level}",
            url=run.get_absolute_url(),
        )  # fmt: skip
        for w in watches
        if w.evidence
    ]
    return _deliver(batch, notices)


def notices_for_attestations(*, attestation_ids: list[int]) -> int:
    """Notices of newly approved reproductions and notes on watched runs."""
    items = list(
        Attestation.objects.filter(pk__in=attestation_ids, state="approved").select_related(
            "run__group", "run__implementation", "author"
        )
    )
    if not items:
        return 0
    batch = f"attestations:{uuid.uuid4().hex}"
    runs = [a.run for a in items]
    watches = _watchers(
        source_ids={r.source_id for r in runs},
        benchmark_ids={r.benchmark_id for r in runs},
        cells={(r.group.cell_key, r.implementation.provider_key) for r in runs},
    )
    notices = [
        Notice(
            user=w.user,
            watch=w,
            batch=batch,
            key=f"attestation:{a.pk}",
            line=f"New {a.get_kind_display().lower()} by {a.author.get_username()} on run "
            f"{a.run.public_id} ({a.run.title})",
            url=reverse("attestations:detail", args=[a.pk]),
        )  # fmt: skip
        for a in items
        for w in watches
        if w.attestations
        and _matches(
            w,
            source_id=a.run.source_id,
            benchmark_id=a.run.benchmark_id,
            cell=(a.run.group.cell_key, a.run.implementation.provider_key),
        )  # fmt: skip
    ]
    return _deliver(batch, notices)


def _deliver(batch: str, notices: list[Notice]) -> int:
    """Steps 1 to 3 of the module docstring; how many emails went out."""
    Notice.objects.bulk_create(notices, ignore_conflicts=True)
    sent = 0
    users = set(
        Notice.objects.filter(batch=batch, sent_at__isnull=True).values_list("user_id", flat=True)
    )
    for user_id in sorted(users):
        now = timezone.now()
        unsent = Notice.objects.filter(batch=batch, user_id=user_id, sent_at__isnull=True)
        if not unsent.update(sent_at=now):
            continue  # another delivery of the same batch claimed them
        rows = list(
            Notice.objects.filter(batch=batch, user_id=user_id, sent_at=now)
            .select_related("user", "watch__benchmark", "watch__source", "watch__run")
            .order_by("id")
        )
        if rows and rows[0].user.email:
            _email(rows[0].user, rows)
            sent += 1
    return sent


def _unsubscribe_url(user, watch: Watch | None = None) -> str:
    token = unsubscribe_token(user=user, watch=watch)
    return site_root() + reverse("attestations:unsubscribe", args=[token])


def _email(user, rows: list[Notice]) -> None:
    site = site_root()
    lines = [f"- {n.line}\n  {site}{n.url}" for n in rows[:EMAIL_LINES]]
    if len(rows) > EMAIL_LINES:
        lines.append(f"- and {len(rows) - EMAIL_LINES} more; the pages above list them all.")
    watches = {n.watch_id: n.watch for n in rows if n.watch is not None}
    stop = [f"- {w.label}: {_unsubscribe_url(user, w)}" for w in watches.values()]
    stop_all = _unsubscribe_url(user)
    body = "\n".join(
        [
            "What changed in what you watch on KernelIndex:",
            "",
            *lines,
            "",
            "Stop one of these watches (no sign-in needed):",
            *stop,
            f"Stop them all: {stop_all}",
            f"Everything you watch: {site}{reverse('attestations:watching')}",
        ]
    )
    count = f"{len(rows)} notice{'s' if len(rows) != 1 else ''}"
    EmailMessage(
        subject=f"[KernelIndex] {count} from what you watch",
        body=body + "\n",
        to=[user.email],
        # RFC 8058: mail clients may offer the one-click unsubscribe themselves.
        headers={
            "List-Unsubscribe": f"<{stop_all}>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        },
    ).send()


def new_batch() -> str:
    return uuid.uuid4().hex

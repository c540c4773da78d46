"""The one way in: normalised records from any source become documents, runs, groups and
ranks, and every fetch of an upstream file becomes a ledger entry.

Ingestion is idempotent and atomic per file: a file is parsed and validated whole before the
first write, written inside one transaction, and a second ingest of the same bytes finds every
run unchanged. An upstream row that comes back with other values becomes a new revision of the
same public id; the old revision is kept, no longer current.

Cost is per file, not per row: each distinct document is resolved once per ingest, the file's
existing runs, groups and public ids are read with one query each, new runs go in as one COPY
(bulk_create elsewhere) with their ranks already computed, and the ranking query afterwards
only writes a row whose rank it changes. The number of queries a file costs does not grow with
its rows (tests/runs/sources/test_ingest.py holds it to that).
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from django.db import connection, transaction
from django.utils import timezone

from kirunner import sanity
from runs.changes.services import changes_detect_after_ingest
from runs.manifest import documents
from runs.manifest.canonical import document_canonical, sha256_digest
from runs.models import ComparisonGroup, Evidence, Publication, Run, Source, history_key
from runs.sources import source_module
from runs.sources.base import IngestError, InputFile, Record
from runs.sources.documents import Resolver
from runs.sources.ledger import IngestReport, ledger_append
from runs.sources.ranking import rank_publication

Progress = Callable[[Iterable], Iterable]

# Bounds of what the columns hold; a record outside them is refused with its line, never
# truncated or left to fail as a database error half-way through a file. Values stop below
# 2**53, not at the column's 2**63: a run's spec carries them, and canonical JSON has no form
# for an integer past 2**53 (the digest would fail half-way through the file's COPY).
_MAX_VALUE = 2**53 - 1
_LIMITS = {
    "benchmark": 80,
    "external_id": 400,
    "timed_pass": 16,
    "metric": 16,
    "unit": 8,
    "sweep_name": 64,
    "provider": 64,
    "revision": 80,
}
# Lookups by a list of values go in chunks: SQLite bounds the parameters of one query.
_CHUNK = 5000


def source_ensure(slug: str, meta: dict) -> Source:
    source, _ = Source.objects.get_or_create(slug=slug, defaults=meta)
    return source


def public_id_for(source_slug: str, external_id: str, attempt: int = 0) -> str:
    """8 hex of SHA-256 over the upstream identity, so a fresh install gives the same id.

    Eight hex digits collide by chance (about one pair in 80,000 rows); the later identity then
    takes the next attempt's id, which is still deterministic for the same ingest order.
    """
    salt = f"#{attempt}" if attempt else ""
    return hashlib.sha256(f"{source_slug}:{external_id}{salt}".encode()).hexdigest()[:8]


_CELL_KEYS = (
    "benchmark",
    "pass",
    "metric",
    "workloadDigest",
    "environmentDigest",
    "family",
    # Liger measures each sweep (over seq, over hidden, ...) as its own experiment, minutes
    # apart; a point two sweeps share is ranked within each sweep separately.
    "sweep",
)


def cell_key(resolver: Resolver, cell: tuple[str, ...]) -> str:
    """The digest of a cell (_CELL_KEYS, in that order), shared by every publication of the
    cell (35 CI runs) and cached in the resolver; a tuple of its strings names it exactly,
    without encoding it."""
    key = ("cell", cell)
    if key not in resolver.cache:
        resolver.cache[key] = sha256_digest(dict(zip(_CELL_KEYS, cell, strict=True)))
    return resolver.cache[key]


def group_key(cell: tuple[str, ...], publication_key: str) -> str:
    """The comparison key: the cell inside one publication, since ranks are computed there."""
    return sha256_digest(
        {**dict(zip(_CELL_KEYS, cell, strict=True)), "publication": publication_key}
    )


def _figures_problem(r: Record) -> str:
    """Why a record's figures contradict each other, or '': every one above zero (a spread
    may be zero), and low quantile <= the primary statistic <= high one (kirunner.sanity's
    order rule, which results of controlled reruns get too)."""
    by_stat = {m.statistic: m.value for m in r.measurements if m.value is not None}
    for name, value in by_stat.items():
        if value < 0 or (value == 0 and name != "std"):
            return f"the {name} must be positive, got {value}"
    for low_name, high_name in (("p20", "p80"), ("min", "max")):
        low, high = by_stat.get(low_name, r.value), by_stat.get(high_name, r.value)
        if sanity.order_problem(low, r.value, high):
            return (
                f"{low_name} {low}, {r.statistic} {r.value}, {high_name} {high} {r.unit} are not "
                f"in order ({low_name} <= {r.statistic} <= {high_name})"
            )
    return ""


def input_check(item: InputFile) -> None:
    """Refuse a file whose name or folder names more than its publication's columns hold (a
    file name of 121 characters was a database error, not a message)."""
    fields = {
        "publication": Publication._meta.get_field("slug").max_length,
        "upstream_commit": Publication._meta.get_field("upstream_commit").max_length,
        "release": Publication._meta.get_field("release").max_length,
    }
    problems = [
        (0, f"the {name.replace('_', ' ')} taken from the file or folder name is longer than "
            f"{limit} characters: {getattr(item, name)[:60]!r}...")
        for name, limit in fields.items()
        if len(getattr(item, name)) > limit
    ]  # fmt: skip
    if problems:
        raise IngestError(item.location, problems)


def records_check(records: list[Record], where: str) -> None:
    """Refuse, with their lines, records the columns cannot hold or no page can rank."""
    problems: list[tuple[int, str]] = []
    for r in records:
        if r.value is None or r.value <= 0:
            problems.append((r.line, f"the {r.statistic} must be positive, got {r.value}"))
        elif problem := _figures_problem(r):
            problems.append((r.line, problem))
        values = [r.value] + [m.value for m in r.measurements]
        if any(v is not None and abs(v) > _MAX_VALUE for v in values):
            problems.append((r.line, f"a value is out of range (over {_MAX_VALUE} {r.unit})"))
        for attr, limit in _LIMITS.items():
            text = getattr(r, attr)
            if len(text) > limit:
                problems.append((r.line, f"{attr} is longer than {limit} characters: {text!r:.60}"))
        if len(problems) >= 100:
            break
    if problems:
        raise IngestError(where, problems)


def run_spec(r: Record, *, source_slug: str, digests: dict) -> dict:
    """The BenchmarkRun spec of a record: what its digest covers."""
    stat = r.statistic
    if r.metric == "latency":
        primary = {"timing": {"latencyNs": {stat: r.value}, "primaryStatistic": stat}}
    else:
        primary = {"memory": {"peakBytes": {stat: r.value}, "primaryStatistic": stat}}
    return {
        "status": r.status,
        **primary,
        "observedAt": documents.iso_utc(r.observed_at),
        "measurements": [
            {"unit": r.unit, "value": m.value, "metric": r.metric, "statistic": m.statistic}
            for m in r.measurements
        ],
        "sourceNative": {
            "source": source_slug,
            "metrics": r.source_metrics,
            "benchmark": f"{r.benchmark}/{r.timed_pass}",
            "externalId": r.external_id,
        },
        **r.extra_spec,
        **digests,
    }


def ingest(
    *, source_slug: str, locations: list[str], progress: Progress | None = None
) -> list[IngestReport]:
    """Import files of one source (the `ingest` command, tests, bench/): each file whole or not
    at all, the first bad one ends it; then change detection over the cells they touched."""
    module = source_module(source_slug)
    source = source_ensure(module.SLUG, module.META)
    # One resolver for all files: the 35 CI runs share most of their documents.
    resolver = Resolver()
    reports = [
        ingest_file(source=source, module=module, item=item, progress=progress, resolver=resolver)
        for item in module.inputs(locations)
    ]
    # Once for all files, over the cells they touched: per file would re-read a cell's growing
    # history 35 times when a source's CI runs come in at once.
    changes_detect_after_ingest(source=source, reports=reports)
    return reports


def ingest_file(
    *,
    source: Source,
    module,
    item: InputFile,
    progress: Progress | None = None,
    resolver: Resolver | None = None,
    trigger: str = "command",
) -> IngestReport:
    """Parse, check and write one upstream file; its ledger entry says what it changed."""
    input_check(item)  # before parsing: a name the columns cannot hold needs no parse to refuse
    return ingest_records(
        source=source,
        item=item,
        records=module.records(item),
        progress=progress,
        resolver=resolver,
        trigger=trigger,
    )


def ingest_records(
    *,
    source: Source,
    item: InputFile,
    records: list[Record],
    progress: Progress | None = None,
    resolver: Resolver | None = None,
    trigger: str = "command",
    unranked: set[int] | None = None,
    savepoint: bool = True,
) -> IngestReport:
    """The one door for records, whoever built them: an upstream file's parsed rows, or the
    record of a verified controlled result (reruns/controlled.py). They are checked whole
    (IngestError, with their lines, before any write), then written, ranked and entered in
    the ledger as a fetch of `item`, in one transaction.

    `unranked`: the ids of the publications to rank go into this set instead of being ranked
    here; the caller ranks them (rank_publication) before its own transaction commits. A
    batch of one-record imports into the same publication (a folder of rerun results) ranks
    it once rather than once per record: ranking is a pass over the whole publication.

    `savepoint=False`: inside a transaction, the records are written in it without a savepoint
    of their own, for a caller whose own savepoint rolls back with them (a controlled result,
    reruns.services.ResultRecorder): a savepoint is two more round trips a record."""
    input_check(item)
    if not records:
        raise IngestError(item.location, [(1, "no records in the file (only a header?)")])
    records_check(records, item.location)
    with transaction.atomic(savepoint=savepoint):
        publication = publication_ensure(source=source, item=item)
        report = records_write(
            source=source,
            publication=publication,
            records=records,
            progress=progress,
            resolver=resolver,
            unranked=unranked,
        )
        report.location = item.location
        statistics_refresh(created=report.created)
        ledger_append(
            source=source,
            publication=publication,
            item=item,
            report=report,
            trigger=trigger,
        )
    return report


# A file that adds at least this many runs, and at least half as many as the table held, has
# PostgreSQL's statistics of runs_run refreshed before the next file is planned.
STATISTICS_MIN_CREATED = 1000


def statistics_refresh(*, created: int) -> None:
    """ANALYZE runs_run after a file that grew it by half or more (PostgreSQL only).

    The next file's lookup of its existing runs is an index probe per id, but the planner picks
    the index from the statistics: planned on those of an empty table (a first load of 35 CI
    runs, before autovacuum looks) or of a few dozen rows, a probe per id became a walk over the
    source's runs per id, about a minute per file at 60k runs. A first load therefore analyses a
    handful of times (the table doubling), a later sync never. Inside a transaction ANALYZE
    counts that transaction's own new rows, so a load in one transaction is planned right too.
    """
    if connection.vendor != "postgresql" or created < STATISTICS_MIN_CREATED:
        return
    table = connection.ops.quote_name(Run._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [table])
        (known,) = cursor.fetchone()
        if created * 2 >= known:
            cursor.execute(f"ANALYZE {table}")


def publication_ensure(*, source: Source, item: InputFile) -> Publication:
    publication, _ = Publication.objects.get_or_create(
        source=source,
        slug=item.publication,
        defaults={
            "upstream_commit": item.upstream_commit,
            "release": item.release,
            "sequence": item.sequence,
        },
    )
    return publication


class _Row:
    """One record on its way in: its documents and keys; its spec, digest and the values it
    is written with once needed (an unchanged run is digested and compared, never built)."""

    __slots__ = (
        "record", "benchmark", "workload", "protocol", "environment", "implementation",
        "cell_key", "group_key", "spec", "spec_json", "digest", "public_id", "revision", "rank",
    )  # fmt: skip

    def __init__(self, record: Record, benchmark, workload, protocol, environment, implementation):
        self.record = record
        self.benchmark = benchmark
        self.workload = workload
        self.protocol = protocol
        self.environment = environment
        self.implementation = implementation
        self.digest = ""
        self.public_id: str | None = None  # a new identity's is chosen once all are known
        self.revision = 1
        self.rank: int | None = None

    def document(self, source_slug: str) -> str:
        """Build and digest the run spec, once; the canonical bytes double as its stored JSON."""
        if not self.digest:
            self.spec = run_spec(
                self.record,
                source_slug=source_slug,
                digests={
                    "protocolDigest": self.protocol.digest,
                    "workloadDigest": self.workload.digest,
                    "environmentDigest": self.environment.digest,
                    "implementationDigest": self.implementation.digest,
                },
            )
            body, self.digest = document_canonical("BenchmarkRun", self.spec)
            self.spec_json = body.decode()
        return self.digest


@dataclass(frozen=True)
class _Existing:
    id: int
    digest: str
    labels: dict
    public_id: str
    revision: int
    publication_id: int


def _existing(source: Source, external_ids: list[str]) -> dict[str, _Existing]:
    # By source, not by publication: the constraint is per source, and the same rows may come
    # back in a file of another name. Plain tuples: model instances cost more than the
    # comparison they serve.
    found: dict[str, _Existing] = {}
    if connection.vendor == "postgresql":
        # One index probe per id, whatever the statistics say. Right after a bulk load the
        # planner has none for the new rows and, given `external_id IN (...)`, bitmap-scans
        # every run of the source instead (0.4 s a file at 77k runs, growing with the table).
        # LIMIT 1 (a source has one current run per id) keeps the lateral subquery from being
        # flattened into a join it could hash, and keeps the estimate small: overestimated,
        # the 10 ms query was JIT-compiled first, for 80 to 200 ms.
        table = connection.ops.quote_name(Run._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT r.external_id, r.id, r.digest, r.labels, r.public_id, r.revision, "
                f"r.publication_id FROM unnest(%s::text[]) AS wanted(external_id) "
                f"CROSS JOIN LATERAL (SELECT * FROM {table} r WHERE r.source_id = %s "
                f"AND r.external_id = wanted.external_id AND r.is_current LIMIT 1) r",
                [external_ids, source.pk],
            )
            rows = cursor.fetchall()
        # Django has psycopg hand jsonb back as text (JSONField decodes it).
        return {
            e: _Existing(pk, digest, json.loads(labels), *rest)
            for e, pk, digest, labels, *rest in rows
        }
    for start in range(0, len(external_ids), _CHUNK):
        rows = (
            Run.objects.filter(
                source=source, is_current=True, external_id__in=external_ids[start : start + _CHUNK]
            )
            .order_by()
            .values_list(
                "external_id", "id", "digest", "labels", "public_id", "revision", "publication_id"
            )
        )
        found.update({row[0]: _Existing(*row[1:]) for row in rows})
    return found


def records_write(
    *,
    source: Source,
    publication: Publication,
    records: list[Record],
    progress: Progress | None = None,
    resolver: Resolver | None = None,
    unranked: set[int] | None = None,
) -> IngestReport:
    """Write records of one publication: documents, groups, new runs and revisions, ranks.

    1. Resolve each record's documents and comparison key (cached per distinct document).
    2. Read the current runs of the file's external ids in one query; a run whose digest and
       labels match is unchanged, one that differs becomes the next revision.
    3. Create the missing comparison groups, sized; pick public ids for new identities.
    4. Rank the runs to write within the file's rows of their group, retire revised runs, and
       stream the new rows in (digesting new records on the way: the database indexes one
       row while the next is built).
    5. Re-rank each touched publication in the database, the authority on ranks and sizes; it
       rewrites only the rows whose rank or size changed (none, for a new suite run). With
       `unranked`, the publications go into that set for the caller to rank instead.
    """
    resolver = resolver or Resolver()
    rows = _prepare(source, publication, records, progress or (lambda it: it), resolver)
    changes = _compare(source, rows)
    to_write, retire = changes.to_write, changes.retire
    report = IngestReport(
        "", publication.slug, len(records), changes.created, len(retire), changes.unchanged,
        changes.revised_ids[:5000],
    )  # fmt: skip
    if not to_write:
        return report

    groups = _groups_ensure(publication, to_write)
    public_ids = _public_ids(
        source, [row.record.external_id for row in to_write if row.public_id is None]
    )
    _rank_in_file(rows)
    if retire:
        Run.objects.filter(id__in=retire).update(is_current=False, rank=None)
    values = _values(source, publication, to_write, groups, public_ids)
    if connection.vendor == "postgresql":
        _copy_runs(values)
    else:
        Run.objects.bulk_create((Run(**v) for _, v in values), batch_size=1000)
    touched = {publication.pk, *changes.reranked}
    if unranked is not None:
        unranked.update(touched)  # ingest_records' caller ranks them
    else:
        for pk in sorted(touched):
            rank_publication(Publication(pk=pk))
    _date_publication(publication, records)
    return report


def _date_publication(publication: Publication, records: list[Record]) -> None:
    """The publication's upstream time: the newest observed time of its rows, so far (a
    publication read from several files keeps the newest)."""
    newest = max(r.observed_at for r in records)
    if publication.published_at is None or newest > publication.published_at:
        Publication.objects.filter(pk=publication.pk).update(published_at=newest)
        publication.published_at = newest


@dataclass
class _Changes:
    """What a file's rows change against the current runs of their external ids."""

    to_write: list[_Row] = field(default_factory=list)  # new runs and new revisions
    retire: list[int] = field(default_factory=list)  # ids of the revisions they replace
    reranked: set[int] = field(default_factory=set)  # publications of the retired runs
    revised_ids: list[list] = field(default_factory=list)  # [public id, new revision]
    created: int = 0
    unchanged: int = 0


def _compare(source: Source, rows: list[_Row]) -> _Changes:
    """Step 2 of records_write: a row whose digest and labels match its current run is
    unchanged, one that differs becomes the next revision, one with no run is created."""
    existing = _existing(source, [row.record.external_id for row in rows])
    changes = _Changes()
    for row in rows:
        old = existing.get(row.record.external_id)
        if old is None:
            changes.created += 1
            changes.to_write.append(row)
            continue
        if old.digest == row.document(source.slug) and old.labels == row.record.labels:
            changes.unchanged += 1
            continue
        row.public_id, row.revision = old.public_id, old.revision + 1
        changes.retire.append(old.id)
        changes.reranked.add(old.publication_id)
        changes.revised_ids.append([row.public_id, row.revision])
        changes.to_write.append(row)
    return changes


def _prepare(
    source, publication, records: list[Record], progress, resolver: Resolver
) -> list[_Row]:
    rows: list[_Row] = []
    seen: dict[str, Record] = {}
    duplicates: list[tuple[int, str]] = []
    publication_key = f"{source.slug}/{publication.slug}"
    # Per file, not in the resolver: a group key names its publication, so it is never
    # needed again by another file, and keeping it would grow with every file ingested.
    group_keys: dict[tuple, str] = {}
    cache = resolver.cache
    keys = [resolver.keys(r) for r in records]
    missing: dict[tuple, Record] = {}
    for r, ks in zip(records, keys, strict=True):
        for k in ks:
            if k not in cache:
                missing.setdefault(k, r)  # the first record naming it: its line is reported
    if missing:
        resolver.resolve(missing, publication.slug)
    for r, (_, kb, kw, kp, ke, ki) in progress(list(zip(records, keys, strict=True))):
        benchmark, workload, protocol = cache[kb], cache[kw], cache[kp]
        environment, implementation = cache[ke], cache[ki]
        if r.external_id in seen:
            earlier = seen[r.external_id]
            if earlier.source_metrics != r.source_metrics:
                duplicates.append((r.line, f"same run as line {earlier.line} with other values"))
            continue
        seen[r.external_id] = r
        row = _Row(r, benchmark, workload, protocol, environment, implementation)
        cell = (
            r.benchmark,
            r.timed_pass,
            r.metric,
            workload.digest,
            environment.digest,
            protocol.family,
            r.sweep_name,
        )
        row.cell_key = cell_key(resolver, cell)
        row.group_key = group_keys.get(cell) or group_keys.setdefault(
            cell, group_key(cell, publication_key)
        )
        rows.append(row)
    if duplicates:
        raise IngestError(publication.slug, duplicates)
    return rows


def _groups_ensure(publication: Publication, rows: list[_Row]) -> dict[str, int]:
    """Ids of the rows' comparison groups by key; a missing group is created with its size
    (all its current runs are among these rows: a new group has no runs yet)."""
    first: dict[str, _Row] = {}
    sizes: dict[str, int] = defaultdict(int)
    for row in rows:
        first.setdefault(row.group_key, row)
        sizes[row.group_key] += 1
    keys = list(first)
    ids: dict[str, int] = {}
    for start in range(0, len(keys), _CHUNK):
        ids.update(
            ComparisonGroup.objects.filter(key__in=keys[start : start + _CHUNK]).values_list(
                "key", "id"
            )
        )
    missing = [
        {
            "key": key,
            "cell_key": row.cell_key,
            "publication_id": publication.pk,
            "benchmark_id": row.benchmark.pk,
            "workload_id": row.workload.pk,
            "environment_id": row.environment.pk,
            "timed_pass": row.record.timed_pass,
            "metric": row.record.metric,
            "family": row.protocol.family,
            "sweep_name": row.record.sweep_name,
            "size": sizes[key],
        }
        for key, row in first.items()
        if key not in ids
    ]
    if not missing:
        return ids
    if connection.vendor == "postgresql":
        # A CI run brings a thousand new groups; ids drawn from the sequence up front let
        # them go in by COPY as the runs do, instead of an INSERT ... RETURNING per thousand.
        new_ids = _allocate_ids(ComparisonGroup, len(missing))
        for values, pk in zip(missing, new_ids, strict=True):
            values["id"] = pk
            ids[values["key"]] = pk
        _copy(ComparisonGroup, missing)
        return ids
    made = ComparisonGroup.objects.bulk_create(
        [ComparisonGroup(**values) for values in missing], batch_size=1000
    )
    ids.update({g.key: g.pk for g in made if g.pk is not None})
    if len(ids) < len(keys):  # a backend that cannot return ids from a bulk insert
        ids.update(
            ComparisonGroup.objects.filter(key__in=[k for k in keys if k not in ids]).values_list(
                "key", "id"
            )
        )
    return ids


def _allocate_ids(model, n: int) -> list[int]:
    table = model._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
            [connection.ops.quote_name(table), model._meta.pk.column, n],
        )
        return [pk for (pk,) in cursor.fetchall()]


def _copy(model, rows: Iterable[dict], *, json_text: frozenset[str] = frozenset()) -> None:
    """COPY rows (dicts keyed by attname) into the model's table; `json_text` names JSON
    columns whose values are JSON text already. A column the first row does not name gets
    its default, as bulk_create would give it (the primary key, a column added later)."""
    rows = iter(rows)
    first = next(rows, None)
    if first is None:
        return
    fields = [
        f
        for f in model._meta.concrete_fields
        if not getattr(f, "generated", False) and (f.attname in first or not f.primary_key)
    ]
    names = [f.attname for f in fields]
    defaults = {
        f.attname: f.get_db_prep_save(f.get_default(), connection)
        for f in fields
        if f.attname not in first
    }
    encode = [
        f.attname
        for f in fields
        if f.get_internal_type() == "JSONField"
        and f.attname in first
        and f.attname not in json_text
    ]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor, cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for row in itertools.chain([first], rows):
            for name in encode:
                row[name] = json.dumps(row[name])
            row.update(defaults)
            copy.write_row([row[name] for name in names])


def _public_ids(source: Source, external_ids: list[str]) -> dict[str, str]:
    first = [(e, public_id_for(source.slug, e)) for e in external_ids]
    wanted = [pid for _, pid in first]
    taken: set[str] = set()
    if connection.vendor == "postgresql":
        # An index probe per id, as in _existing, whatever the planner believes.
        table = connection.ops.quote_name(Run._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT r.public_id FROM unnest(%s::text[]) AS wanted(public_id) "
                f"CROSS JOIN LATERAL (SELECT public_id FROM {table} r "
                f"WHERE r.public_id = wanted.public_id LIMIT 1) r",
                [wanted],
            )
            taken.update(pid for (pid,) in cursor.fetchall())
    else:
        for start in range(0, len(wanted), _CHUNK):
            taken.update(
                Run.objects.filter(public_id__in=wanted[start : start + _CHUNK]).values_list(
                    "public_id", flat=True
                )
            )
    out: dict[str, str] = {}
    for external_id, pid in first:
        attempt = 0
        while pid in taken:
            attempt += 1
            pid = public_id_for(source.slug, external_id, attempt)
            if Run.objects.filter(public_id=pid).exists():
                taken.add(pid)
        taken.add(pid)
        out[external_id] = pid
    return out


def _rank_in_file(rows: list[_Row]) -> None:
    """RANK() by median among the file's rows of each group, as the ranking query computes it
    (ties share a rank): right whenever the file holds the whole group, as a suite run does,
    so that query finds nothing to rewrite. Where it is not, that query corrects it."""
    medians: dict[str, list[int]] = defaultdict(list)
    for row in rows:
        medians[row.group_key].append(row.record.value)
    for values in medians.values():
        values.sort()
    for row in rows:
        row.rank = bisect.bisect_left(medians[row.group_key], row.record.value) + 1


def _values(
    source: Source,
    publication: Publication,
    rows: list[_Row],
    groups: dict[str, int],
    public_ids: dict[str, str],
) -> Iterator[tuple[_Row, dict]]:
    """The column values of each run to create, keyed by attname; built as they are written,
    so a new record is digested while the database takes the previous one."""
    now = timezone.now()
    for row in rows:
        r = row.record
        measured = {m.statistic: m.value for m in r.measurements}
        digest = row.document(source.slug)
        yield (
            row,
            {
                "public_id": row.public_id or public_ids[r.external_id],
                "revision": row.revision,
                "is_current": True,
                "source_id": source.pk,
                "publication_id": publication.pk,
                "benchmark_id": row.benchmark.pk,
                "implementation_id": row.implementation.pk,
                "workload_id": row.workload.pk,
                "protocol_id": row.protocol.pk,
                "environment_id": row.environment.pk,
                "group_id": groups[row.group_key],
                "history_key": history_key(row.cell_key, row.implementation.provider_key),
                "timed_pass": r.timed_pass,
                "metric": r.metric,
                "unit": r.unit,
                "median": r.value,
                "p20": measured.get("p20"),
                "p80": measured.get("p80"),
                "source_metrics": r.source_metrics,
                "sweep_name": r.sweep_name,
                "sweep_value": r.sweep_value,
                "observed_at": r.observed_at,
                "status": r.status,
                "labels": r.labels,
                "external_id": r.external_id,
                "name": r.name[:120],
                "title": r.title[:300],
                "spec": row.spec,
                "digest": digest,
                # Every new run and revision starts at `reported`; a controlled run's own level
                # is written by runs.evidence.evidence_apply, with the verdict it carries, in
                # the same transaction (reruns.services).
                "evidence": Evidence.REPORTED,
                "rank": row.rank,
                "created_at": now,
            },
        )


def _copy_runs(values: Iterable[tuple[_Row, dict]]) -> None:
    """COPY on PostgreSQL: a CI run is a couple of thousand rows, and COPY moves them in a
    fraction of what a multi-row INSERT costs to build and to parse. The rows are built as
    the COPY runs, so building one overlaps with the database's work on the one before."""

    def rows() -> Iterator[dict]:
        for row, v in values:
            v["spec"] = row.spec_json  # the canonical bytes: JSON already, encoded once
            yield v

    _copy(Run, rows(), json_text=frozenset({"spec"}))

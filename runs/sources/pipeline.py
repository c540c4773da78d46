"""The one way in: normalised records from any source become documents, runs, groups and
ranks, and every fetch of an upstream file becomes a ledger entry.

Ingestion is idempotent and atomic per file: a file is parsed and validated whole before the
first write, written inside one transaction, and a second ingest of the same bytes finds every
run unchanged. An upstream row that comes back with other values becomes a new revision of the
same public id; the old revision is kept, no longer current.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db import connection, transaction

from runs.evidence import controlled_run_create
from runs.manifest import documents
from runs.manifest.canonical import document_digest, sha256_digest
from runs.models import (
    Benchmark,
    ComparisonGroup,
    Environment,
    Gpu,
    Implementation,
    Project,
    Protocol,
    Publication,
    Run,
    Source,
    Workload,
)
from runs.reference import catalogue
from runs.sources.base import Doc, IngestError, InputFile, Record
from runs.sources.ledger import ledger_append
from runs.sources.ranking import rank_publication

Progress = Callable[[Iterable], Iterable]

# Bounds of what the columns hold; a record outside them is refused with its line, never
# truncated or left to fail as a database error half-way through a file.
_MAX_VALUE = 2**63 - 1
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


@dataclass
class IngestReport:
    location: str
    publication: str
    rows: int
    created: int
    revised: int
    unchanged: int
    runs: list[Run] = field(default_factory=list, repr=False)

    def __str__(self) -> str:
        return (
            f"{self.location}: {self.rows} rows, {self.created} created, "
            f"{self.revised} revised, {self.unchanged} unchanged"
        )


def source_ensure(slug: str, meta: dict) -> Source:
    source, _ = Source.objects.get_or_create(slug=slug, defaults=meta)
    return source


def gpu_ensure(spec: catalogue.GpuSpec) -> Gpu:
    gpu, _ = Gpu.objects.get_or_create(
        upstream_name=spec.upstream_name,
        defaults={
            "slug": spec.slug,
            "vendor": spec.vendor,
            "product": spec.product,
            "form_factor": spec.form_factor,
            "architecture": spec.architecture,
            "memory_gib": spec.memory_gib,
            "peak_bandwidth_gbs": spec.peak_bandwidth_gbs,
            "peak_bf16_tflops": spec.peak_bf16_tflops,
            "gpu_class": spec.gpu_class,
        },
    )
    return gpu


def _document_ensure(model, kind: str, **fields):
    obj, _ = model.objects.get_or_create(
        digest=document_digest(kind, fields["spec"]), defaults=fields
    )
    return obj


def _workload_create(benchmark: Benchmark, params: dict, name: str, label: str, spec: dict):
    inputs = spec.get("inputs")
    return _document_ensure(
        Workload,
        "Workload",
        name=name[:120],
        title=f"{benchmark.title} · {label}"[:200],
        spec=spec,
        benchmark=benchmark,
        slug=catalogue.workload_slug(params)[:200],
        label=label[:300],
        parameters=params,
        tensors=inputs if isinstance(inputs, list) else [],
        dtype=str(params.get("dtype", ""))[:16],
    )


def workload_ensure(*, benchmark: Benchmark, params: dict) -> Workload:
    """The Liger-style Workload document of these parameters, created on first use."""
    name, label, spec, _ = documents.workload_spec(benchmark.slug, params)
    return _workload_create(benchmark, params, name, label, spec)


def implementation_ensure(*, provider_key: str, revision: str) -> Implementation:
    """The Implementation document of a provider at a revision, with its project."""
    name, title, spec = documents.implementation_spec(provider_key, revision)
    prov = catalogue.provider(provider_key)
    project, _ = Project.objects.get_or_create(
        slug=prov.project_slug, defaults={"name": prov.project_name, "url": prov.project_url}
    )
    return _document_ensure(
        Implementation,
        "Implementation",
        name=name,
        title=title[:200],
        spec=spec,
        project=project,
        display_name=prov.display_name[:120],
        provider_key=provider_key,
        revision=revision,
    )


def public_id_for(source_slug: str, external_id: str, attempt: int = 0) -> str:
    """8 hex of SHA-256 over the upstream identity, so a fresh install gives the same id.

    Eight hex digits collide by chance (about one pair in 80,000 rows); the later identity then
    takes the next attempt's id, which is still deterministic for the same ingest order.
    """
    salt = f"#{attempt}" if attempt else ""
    return hashlib.sha256(f"{source_slug}:{external_id}{salt}".encode()).hexdigest()[:8]


class Resolver:
    """Get-or-create of the few distinct documents a file refers to, each built, digested and
    looked up once per key. One resolver may serve many files of one ingest (35 CI runs share
    most documents); it is only reused after a file committed, since a failing file ends it."""

    def __init__(self) -> None:
        self.cache: dict[tuple, object] = {}

    def _get(self, key: tuple, ensure):
        if key not in self.cache:
            self.cache[key] = ensure()
        return self.cache[key]

    def gpu(self, gpu_name: str, line: int, where: str) -> Gpu:
        def ensure():
            spec = catalogue.GPUS.get(gpu_name)
            if spec is None:
                raise IngestError(where, [(line, f"GPU {gpu_name!r} is not in the catalogue")])
            return gpu_ensure(spec)

        return self._get(("gpu", gpu_name), ensure)

    def benchmark(self, slug: str, title: str) -> Benchmark:
        return self._get(
            ("benchmark", slug),
            lambda: Benchmark.objects.get_or_create(
                slug=slug, defaults={"title": (title or catalogue.benchmark_title(slug))[:200]}
            )[0],
        )

    def workload(self, doc: Doc, benchmark: Benchmark, params: dict) -> Workload:
        def ensure():
            name, label, spec = doc.build()
            return _workload_create(benchmark, params, name, label, spec)

        return self._get(("workload", *doc.key), ensure)

    def protocol(self, doc: Doc, timed_pass: str, metric: str) -> Protocol:
        def ensure():
            name, title, spec = doc.build()
            return _document_ensure(
                Protocol,
                "BenchmarkProtocol",
                name=name[:120],
                title=title[:200],
                spec=spec,
                family=spec["comparability"]["family"],
                harness=spec["harness"]["name"],
                timer=spec["measurement"]["timer"],
                primary_statistic=spec["measurement"]["primaryStatistic"],
                timed_pass=timed_pass,
                metric=metric,
            )

        return self._get(("protocol", *doc.key), ensure)

    def environment(self, doc: Doc, gpu: Gpu) -> Environment:
        def ensure():
            name, title, spec = doc.build()
            return _document_ensure(
                Environment,
                "ExecutionEnvironment",
                name=name[:120],
                title=title[:200],
                spec=spec,
                gpu=gpu,
            )

        return self._get(("environment", *doc.key), ensure)

    def implementation(self, provider_key: str, revision: str) -> Implementation:
        return self._get(
            ("implementation", provider_key, revision),
            lambda: implementation_ensure(provider_key=provider_key, revision=revision),
        )

    def keys(self, cell: dict, publication_key: str) -> tuple[str, str]:
        """(cell key, comparison key): digests of the cell, and of the cell in a publication.
        The cell key is shared by every publication of the cell (35 CI runs); the comparison
        key is not, since ranks are computed inside one publication."""
        frozen = _freeze(cell)
        cell_key = self.cache.get(("cell", frozen))
        if cell_key is None:
            cell_key = self.cache[("cell", frozen)] = sha256_digest(cell)
        group = ("group", frozen, publication_key)
        if group not in self.cache:
            self.cache[group] = sha256_digest({**cell, "publication": publication_key})
        return cell_key, self.cache[group]


def _freeze(d: dict) -> str:
    # JSON keeps 1, 1.5, true and "1" apart, and the C encoder is cheap per row.
    return json.dumps(d, sort_keys=True)


def records_check(records: list[Record], where: str) -> None:
    """Refuse, with their lines, records the columns cannot hold or no page can rank."""
    problems: list[tuple[int, str]] = []
    for r in records:
        if r.value is None or r.value <= 0:
            problems.append((r.line, f"the {r.statistic} must be positive, got {r.value}"))
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
    records = module.records(item)
    if not records:
        raise IngestError(item.location, [(1, "no records in the file (only a header?)")])
    records_check(records, item.location)
    with transaction.atomic():
        publication = publication_ensure(source=source, item=item)
        report = records_write(
            source=source,
            publication=publication,
            records=records,
            progress=progress,
            resolver=resolver,
        )
        report.location = item.location
        ledger_append(
            source=source,
            publication=publication,
            item=item,
            report=report,
            trigger=trigger,
        )
    return report


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
    # comparison they serve. Chunks keep SQLite under its bound on query parameters.
    found: dict[str, _Existing] = {}
    for start in range(0, len(external_ids), 5000):
        chunk = external_ids[start : start + 5000]
        rows = (
            Run.objects.filter(source=source, is_current=True, external_id__in=chunk)
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
    controlled: bool = False,
) -> IngestReport:
    """Write records of one publication: documents, groups, new runs and revisions, ranks.

    `controlled` runs are KernelIndex's own measurements: each is created through
    runs.evidence.controlled_run_create, the one writer of their evidence level.
    """
    resolver = resolver or Resolver()
    prepared = _prepare(source, publication, records, progress or (lambda it: it), resolver)
    existing = _existing(source, [p["record"].external_id for p in prepared])
    groups = _groups_ensure(publication, prepared)
    new_public_ids = _public_ids(
        source, [p["record"].external_id for p in prepared if p["record"].external_id not in existing]
    )  # fmt: skip
    to_create: list[Run] = []
    retire: list[int] = []
    reranked = {publication.pk}
    created = revised = unchanged = 0
    for p in prepared:
        r: Record = p["record"]
        old = existing.get(r.external_id)
        if old is not None and old.digest == p["digest"] and old.labels == r.labels:
            unchanged += 1
            continue
        if old is None:
            public_id, revision = new_public_ids[r.external_id], 1
            created += 1
        else:
            public_id, revision = old.public_id, old.revision + 1
            retire.append(old.id)
            reranked.add(old.publication_id)
            revised += 1
        measured = {m.statistic: m.value for m in r.measurements}
        to_create.append(
            Run(
                public_id=public_id,
                revision=revision,
                is_current=True,
                source=source,
                publication=publication,
                benchmark=p["benchmark"],
                implementation=p["implementation"],
                workload=p["workload"],
                protocol=p["protocol"],
                environment=p["environment"],
                group=groups[p["group_key"]],
                timed_pass=r.timed_pass,
                metric=r.metric,
                unit=r.unit,
                median=r.value,
                p20=measured.get("p20"),
                p80=measured.get("p80"),
                source_metrics=r.source_metrics,
                sweep_name=r.sweep_name,
                sweep_value=r.sweep_value,
                observed_at=r.observed_at,
                status=r.status,
                labels=r.labels,
                external_id=r.external_id,
                name=r.name[:120],
                title=r.title[:300],
                spec=p["spec"],
                digest=p["digest"],
                # A new revision is new upstream data: it starts at `reported` like any import.
            )
        )
    if retire:
        Run.objects.filter(id__in=retire).update(is_current=False, rank=None)
    if controlled:
        to_create = [controlled_run_create(**_fields(run)) for run in to_create]
    else:
        _insert_runs(to_create)
    if created or revised:
        for pk in sorted(reranked):
            rank_publication(Publication(pk=pk))
    return IngestReport("", publication.slug, len(records), created, revised, unchanged, to_create)


def _fields(run: Run) -> dict:
    return {
        f.attname: getattr(run, f.attname)
        for f in Run._meta.concrete_fields
        if not f.primary_key and f.attname != "created_at"
    }


def _public_ids(source: Source, external_ids: list[str]) -> dict[str, str]:
    first = [(e, public_id_for(source.slug, e)) for e in external_ids]
    taken: set[str] = set()
    wanted = [pid for _, pid in first]
    for start in range(0, len(wanted), 5000):
        taken.update(
            Run.objects.filter(public_id__in=wanted[start : start + 5000]).values_list(
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


def _prepare(
    source, publication, records: list[Record], progress, resolver: Resolver
) -> list[dict]:
    prepared: list[dict] = []
    seen: dict[str, Record] = {}
    duplicates: list[tuple[int, str]] = []
    publication_key = f"{source.slug}/{publication.slug}"
    for r in progress(records):
        gpu = resolver.gpu(r.gpu_name, r.line, publication.slug)
        benchmark = resolver.benchmark(r.benchmark, r.benchmark_title)
        workload = resolver.workload(r.workload, benchmark, r.params)
        protocol = resolver.protocol(r.protocol, r.timed_pass, r.metric)
        environment = resolver.environment(r.environment, gpu)
        implementation = resolver.implementation(r.provider, r.revision)
        if r.external_id in seen:
            earlier = seen[r.external_id]
            if earlier.source_metrics != r.source_metrics:
                duplicates.append((r.line, f"same run as line {earlier.line} with other values"))
            continue
        seen[r.external_id] = r
        spec = run_spec(
            r,
            source_slug=source.slug,
            digests={
                "protocolDigest": protocol.digest,
                "workloadDigest": workload.digest,
                "environmentDigest": environment.digest,
                "implementationDigest": implementation.digest,
            },
        )
        cell = {
            "benchmark": r.benchmark,
            "pass": r.timed_pass,
            "metric": r.metric,
            "workloadDigest": workload.digest,
            "environmentDigest": environment.digest,
            "family": protocol.family,
            # Liger measures each sweep (over seq, over hidden, ...) as its own experiment,
            # minutes apart; a point two sweeps share is ranked within each sweep separately.
            "sweep": r.sweep_name,
        }
        cell_key, group_key = resolver.keys(cell, publication_key)
        prepared.append(
            {
                "record": r,
                "spec": spec,
                "digest": document_digest("BenchmarkRun", spec),
                "benchmark": benchmark,
                "workload": workload,
                "protocol": protocol,
                "environment": environment,
                "implementation": implementation,
                "cell_key": cell_key,
                "group_key": group_key,
            }
        )
    if duplicates:
        raise IngestError(publication.slug, duplicates)
    return prepared


def _insert_runs(runs: list[Run]) -> None:
    """bulk_create, or COPY on PostgreSQL: a CI run is a couple of thousand rows, and COPY
    moves them in a fraction of what a multi-row INSERT costs to build and to parse."""
    if connection.vendor != "postgresql" or len(runs) < 100:
        Run.objects.bulk_create(runs, batch_size=1000)
        return
    fields = [f for f in Run._meta.concrete_fields if not f.primary_key]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    table = connection.ops.quote_name(Run._meta.db_table)
    with connection.cursor() as cursor, cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for run in runs:
            copy.write_row(
                [f.get_db_prep_save(f.pre_save(run, add=True), connection) for f in fields]
            )


def _groups_ensure(publication: Publication, prepared: list[dict]) -> dict[str, ComparisonGroup]:
    wanted = {p["group_key"]: p for p in prepared}
    groups = {g.key: g for g in ComparisonGroup.objects.filter(key__in=list(wanted))}
    missing = [
        ComparisonGroup(
            key=key,
            cell_key=p["cell_key"],
            publication=publication,
            benchmark=p["benchmark"],
            workload=p["workload"],
            environment=p["environment"],
            timed_pass=p["record"].timed_pass,
            metric=p["record"].metric,
            family=p["protocol"].family,
            sweep_name=p["record"].sweep_name,
        )
        for key, p in wanted.items()
        if key not in groups
    ]
    ComparisonGroup.objects.bulk_create(missing, batch_size=1000)
    if missing:
        groups.update({g.key: g for g in ComparisonGroup.objects.filter(key__in=list(wanted))})
    return groups

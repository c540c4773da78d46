"""Writes to the run data: ingestion and ranking.

Ingestion is idempotent and atomic per file: a file is parsed and validated whole before the
first write, written inside one transaction, and a second ingest of the same bytes finds every
run unchanged. An upstream row that comes back with other values becomes a new revision of the
same public id; the old revision is kept, no longer current.
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from django.db import connection, transaction

from runs import catalogue, documents
from runs.canonical import document_digest, sha256_digest
from runs.models import (
    Benchmark,
    ComparisonGroup,
    Environment,
    Gpu,
    Implementation,
    ImportRecord,
    Project,
    Protocol,
    Publication,
    Run,
    Source,
    Workload,
)
from runs.parsers import IngestError, ParsedRow, liger_external_id, parse_liger_csv
from runs.ranking import rank_publication

_NOT_NAME = re.compile(r"[^a-z0-9]+")

SOURCES = {
    "liger-kernel-bench": {
        "name": "Liger-Kernel benchmarks",
        "description": (
            "The benchmark results Liger-Kernel keeps in its repository "
            "(benchmark/data/all_benchmark_data.csv), written by its benchmark scripts on "
            "contributors' GPUs."
        ),
        "license": "BSD-2-Clause",
        "homepage": "https://github.com/linkedin/Liger-Kernel",
        "harness_repository": "https://github.com/linkedin/Liger-Kernel",
        "published_date": date(2026, 8, 20),
    },
    "liger-kernel-ci": {
        "name": "Liger-Kernel CI benchmarks",
        "description": (
            "Liger-Kernel's continuous benchmark runs (gh-pages branch, benchmarks/<commit>/"
            "benchmark.csv): the whole suite run by upstream CI at one commit per folder."
        ),
        "license": "BSD-2-Clause",
        "homepage": "https://github.com/linkedin/Liger-Kernel/tree/gh-pages/benchmarks",
        "harness_repository": "https://github.com/linkedin/Liger-Kernel",
        "published_date": date(2026, 6, 10),
    },
}

Progress = Callable[[Iterable], Iterable]


@dataclass
class IngestReport:
    location: str
    publication: str
    rows: int
    created: int
    revised: int
    unchanged: int

    def __str__(self) -> str:
        return (
            f"{self.location}: {self.rows} rows, {self.created} created, "
            f"{self.revised} revised, {self.unchanged} unchanged"
        )


@dataclass
class InputFile:
    location: str  # what the user named: a path or a URL
    data: bytes
    publication: str  # publication slug: the file name, or the CI folder (commit[-vX.Y.Z])
    sequence: int = 0


def source_ensure(slug: str) -> Source:
    if slug not in SOURCES:
        raise IngestError(slug, [(0, f"unknown source; known: {', '.join(sorted(SOURCES))}")])
    source, _ = Source.objects.get_or_create(slug=slug, defaults=SOURCES[slug])
    return source


def _read_location(location: str) -> tuple[str, bytes]:
    """(name, bytes) of a local path or an http(s) URL."""
    parsed = urllib.parse.urlparse(location)
    if parsed.scheme in ("http", "https"):
        with urllib.request.urlopen(location, timeout=60) as response:  # noqa: S310 (scheme checked)
            return parsed.path, response.read()
    if parsed.scheme not in ("", "file"):
        raise IngestError(location, [(0, "only local paths and http(s) URLs can be imported")])
    path = Path(parsed.path if parsed.scheme == "file" else location)
    if not path.exists():
        raise IngestError(location, [(0, "no such file or folder")])
    return str(path), path.read_bytes()


def inputs_for(source_slug: str, locations: list[str]) -> list[InputFile]:
    """Expand the command line into files. A liger-kernel-ci root folder expands to its runs in
    the order upstream CI ran them (commits.txt)."""
    files: list[InputFile] = []
    for location in locations:
        path = Path(location)
        if (
            source_slug == "liger-kernel-ci"
            and path.is_dir()
            and not (path / "benchmark.csv").exists()
        ):
            order_file = path / "commits.txt"
            folders = sorted(p.name for p in path.iterdir() if (p / "benchmark.csv").exists())
            if order_file.exists():
                listed = [c.strip() for c in order_file.read_text().split() if c.strip()]
                folders = [f for f in listed if f in folders] + [
                    f for f in folders if f not in listed
                ]
            for seq, folder in enumerate(folders, start=1):
                csv_path = path / folder / "benchmark.csv"
                files.append(InputFile(str(csv_path), csv_path.read_bytes(), folder, seq))
            continue
        if path.is_dir():
            path = path / "benchmark.csv"
            location = str(path)
        name, data = _read_location(location)
        if source_slug == "liger-kernel-ci":
            publication = Path(name).parent.name  # .../<commit>[-vX.Y.Z]/benchmark.csv
        else:
            publication = Path(name).name
        files.append(InputFile(location, data, publication))
    return files


def ingest(
    *, source_slug: str, locations: list[str], progress: Progress | None = None
) -> list[IngestReport]:
    source = source_ensure(source_slug)
    # One resolver for all files: the 35 CI runs share most of their documents. It is only
    # reused after a file committed, since the first failing file ends the loop.
    resolver = _Resolver()
    reports = []
    for item in inputs_for(source_slug, locations):
        reports.append(ingest_file(source=source, item=item, progress=progress, resolver=resolver))
    return reports


def _document_ensure(model, kind: str, **fields):
    obj, _ = model.objects.get_or_create(
        digest=document_digest(kind, fields["spec"]), defaults=fields
    )
    return obj


def workload_ensure(*, benchmark: Benchmark, params: dict) -> Workload:
    """The Workload document of these parameters, created on first use."""
    name, label, spec, tensors = documents.workload_spec(benchmark.slug, params)
    return _document_ensure(
        Workload,
        "Workload",
        name=name,
        title=f"{benchmark.title} · {label}",
        spec=spec,
        benchmark=benchmark,
        slug=catalogue.workload_slug(params),
        label=label,
        parameters=params,
        tensors=tensors or [],
        dtype=str(params.get("dtype", "")),
    )


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
        title=title,
        spec=spec,
        project=project,
        display_name=prov.display_name,
        provider_key=provider_key,
        revision=revision,
    )


class _Resolver:
    """Get-or-create of the few distinct documents a file refers to.

    A file of thousands of rows names a few hundred documents; each is built, digested and
    looked up once per key, since canonicalising specs is the costly part of an ingest.
    """

    def __init__(self) -> None:
        self.cache: dict[tuple, object] = {}

    def _get(self, key: tuple, ensure):
        if key not in self.cache:
            self.cache[key] = ensure()
        return self.cache[key]

    def workload(self, benchmark: Benchmark, params: dict) -> Workload:
        return self._get(
            ("workload", benchmark.slug, _freeze(params)),
            lambda: workload_ensure(benchmark=benchmark, params=params),
        )

    def protocol(self, timed_pass: str, metric: str) -> Protocol:
        def ensure():
            name, title, spec = documents.protocol_spec(timed_pass, metric)
            return _document_ensure(
                Protocol,
                "BenchmarkProtocol",
                name=name,
                title=title,
                spec=spec,
                family=documents.LIGER_FAMILY,
                harness=spec["harness"]["name"],
                timer=spec["measurement"]["timer"],
                timed_pass=timed_pass,
                metric=metric,
            )

        return self._get(("protocol", timed_pass, metric), ensure)

    def environment(self, spec_gpu: catalogue.GpuSpec, gpu: Gpu) -> Environment:
        def ensure():
            name, title, spec = documents.environment_spec(spec_gpu)
            return _document_ensure(
                Environment, "ExecutionEnvironment", name=name, title=title, spec=spec, gpu=gpu
            )

        return self._get(("environment", spec_gpu.upstream_name), ensure)

    def implementation(self, provider_key: str, revision: str) -> Implementation:
        return self._get(
            ("implementation", provider_key, revision),
            lambda: implementation_ensure(provider_key=provider_key, revision=revision),
        )

    def keys(self, cell: dict, publication_key: str) -> tuple[str, str]:
        """(cell key, comparison key): digests of the cell, and of the cell in a publication."""
        frozen = ("keys", _freeze(cell))
        if frozen not in self.cache:
            cell_key = sha256_digest(cell)
            self.cache[frozen] = (cell_key, sha256_digest({**cell, "publication": publication_key}))
        return self.cache[frozen]


def _freeze(d: dict) -> str:
    # JSON keeps 1, 1.5, true and "1" apart, and the C encoder is cheap per row.
    return json.dumps(d, sort_keys=True)


def ingest_file(
    *,
    source: Source,
    item: InputFile,
    progress: Progress | None = None,
    resolver: _Resolver | None = None,
) -> IngestReport:
    rows = parse_liger_csv(item.data, item.location)
    progress = progress or (lambda it: it)
    commit, _, release = item.publication.partition("-v")
    is_ci = source.slug == "liger-kernel-ci"
    with transaction.atomic():
        publication, _ = Publication.objects.get_or_create(
            source=source,
            slug=item.publication,
            defaults={
                "upstream_commit": commit if is_ci else "",
                "release": f"v{release}" if release else "",
                "sequence": item.sequence,
            },
        )
        prepared = _prepare_rows(
            source, publication, rows, is_ci, progress, resolver or _Resolver()
        )
        counts = _write_runs(source, publication, prepared, item.location)
        if counts["created"] or counts["revised"]:
            rank_publication(publication)
        ImportRecord.objects.create(
            source=source,
            publication=publication,
            location=item.location,
            sha256=hashlib.sha256(item.data).hexdigest(),
            rows=len(rows),
            **counts,
        )
    return IngestReport(item.location, item.publication, len(rows), **counts)


def _prepare_rows(
    source, publication, rows: list[ParsedRow], is_ci: bool, progress, resolver: _Resolver
) -> list[dict]:
    benchmarks: dict[str, Benchmark] = {}
    prefix = f"{publication.slug}/" if is_ci else ""
    prepared: list[dict] = []
    seen: dict[str, ParsedRow] = {}
    duplicates: list[tuple[int, str]] = []
    for row in progress(rows):
        spec_gpu = catalogue.GPUS.get(row.gpu_name)
        if spec_gpu is None:
            raise IngestError(
                publication.slug, [(row.line, f"GPU {row.gpu_name!r} is not in the catalogue")]
            )
        gpu = resolver.cache.get(("gpu", row.gpu_name)) or gpu_ensure(spec_gpu)
        resolver.cache[("gpu", row.gpu_name)] = gpu

        if row.benchmark not in benchmarks:
            benchmarks[row.benchmark], _ = Benchmark.objects.get_or_create(
                slug=row.benchmark, defaults={"title": catalogue.benchmark_title(row.benchmark)}
            )
        benchmark = benchmarks[row.benchmark]

        workload = resolver.workload(benchmark, row.params)
        protocol = resolver.protocol(row.timed_pass, row.metric)
        environment = resolver.environment(spec_gpu, gpu)
        implementation = resolver.implementation(
            row.provider, _implementation_revision(row, publication, is_ci)
        )

        row.external_id = liger_external_id(row, gpu.slug, workload.slug, prefix)
        if row.external_id in seen:
            earlier = seen[row.external_id]
            if earlier.source_metrics != row.source_metrics:
                duplicates.append((row.line, f"same run as line {earlier.line} with other values"))
            continue
        seen[row.external_id] = row
        if is_ci:
            row.labels = {**row.labels, "upstream_commit": publication.upstream_commit}
            if publication.release:
                row.labels["release"] = publication.release

        spec = documents.run_spec(
            row,
            source_slug=source.slug,
            protocol_digest=protocol.digest,
            workload_digest=workload.digest,
            environment_digest=environment.digest,
            implementation_digest=implementation.digest,
        )
        cell = {
            "benchmark": row.benchmark,
            "pass": row.timed_pass,
            "metric": row.metric,
            "workloadDigest": workload.digest,
            "environmentDigest": environment.digest,
            "family": protocol.family,
            # Upstream measures each sweep (over seq, over hidden, ...) as its own experiment,
            # minutes apart; a point two sweeps share is ranked within each sweep separately.
            "sweep": row.sweep_name,
        }
        cell_key, group_key = resolver.keys(cell, f"{source.slug}/{publication.slug}")
        prepared.append(
            {
                "row": row,
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


def _implementation_revision(row: ParsedRow, publication: Publication, is_ci: bool) -> str:
    """Liger's own rows name the Liger revision (the CI commit, else the release label); the
    other providers' versions were not recorded upstream."""
    if not row.provider.startswith("liger"):
        return "unknown"
    if is_ci and publication.upstream_commit:
        return publication.upstream_commit
    return row.labels.get("liger_version") or "unknown"


def _run_name(source_slug: str, external_id: str, metric: str) -> str:
    prefix = {"liger-kernel-bench": "liger", "liger-kernel-ci": "liger-ci"}.get(
        source_slug, source_slug
    )
    stem = external_id.removesuffix("/memory").rsplit("/", 1)[0]  # drop the timestamp
    name = f"{prefix}-{stem}{'-memory' if metric == 'memory' else ''}".lower()
    return _NOT_NAME.sub("-", name)[:100]


def public_id_for(source_slug: str, external_id: str, attempt: int = 0) -> str:
    """8 hex of SHA-256 over the upstream identity, so a fresh install gives the same id.

    Eight hex digits collide by chance (about one pair in 80,000 rows); the later identity then
    takes the next attempt's id, which is still deterministic for the same ingest order.
    """
    salt = f"#{attempt}" if attempt else ""
    return hashlib.sha256(f"{source_slug}:{external_id}{salt}".encode()).hexdigest()[:8]


def _write_runs(
    source: Source, publication: Publication, prepared: list[dict], location: str
) -> dict:
    # Plain tuples: a CI run holds a couple of thousand rows and model instances cost more
    # than the comparison they serve.
    existing = {
        row[0]: _Existing(*row[1:])
        for row in Run.objects.filter(source=source, publication=publication, is_current=True)
        .order_by()
        .values_list("external_id", "id", "digest", "labels", "public_id", "revision")
    }
    groups = _groups_ensure(publication, prepared)
    to_create: list[Run] = []
    retire: list[int] = []
    created = revised = unchanged = 0

    new_ids = [(p, public_id_for(source.slug, p["row"].external_id)) for p in prepared
               if p["row"].external_id not in existing]  # fmt: skip
    taken = set(
        Run.objects.filter(public_id__in=[pid for _, pid in new_ids]).values_list(
            "public_id", flat=True
        )
    )
    new_public_ids: dict[str, str] = {}
    for p, pid in new_ids:
        attempt = 0
        while pid in taken:
            attempt += 1
            pid = public_id_for(source.slug, p["row"].external_id, attempt)
            if Run.objects.filter(public_id=pid).exists():
                taken.add(pid)
        taken.add(pid)
        new_public_ids[p["row"].external_id] = pid

    for p in prepared:
        row: ParsedRow = p["row"]
        old = existing.get(row.external_id)
        if old is not None and old.digest == p["digest"] and old.labels == row.labels:
            unchanged += 1
            continue
        if old is None:
            public_id, revision = new_public_ids[row.external_id], 1
            created += 1
        else:
            public_id, revision = old.public_id, old.revision + 1
            retire.append(old.id)
            revised += 1
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
                timed_pass=row.timed_pass,
                metric=row.metric,
                unit=row.unit,
                median=row.median,
                p20=row.p20,
                p80=row.p80,
                source_metrics=row.source_metrics,
                sweep_name=row.sweep_name,
                sweep_value=row.sweep_value,
                observed_at=row.observed_at,
                status="passed",
                labels=row.labels,
                external_id=row.external_id,
                name=_run_name(source.slug, row.external_id, row.metric),
                title=f"{p['benchmark'].title} · {row.raw_provider} · {row.timed_pass}"
                + (" · memory" if row.metric == "memory" else ""),
                spec=p["spec"],
                digest=p["digest"],
                # A new revision is new upstream data: it starts at `reported` like any import.
            )
        )
    if retire:
        Run.objects.filter(id__in=retire).update(is_current=False, rank=None)
    _insert_runs(to_create)
    return {"created": created, "revised": revised, "unchanged": unchanged}


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


@dataclass(frozen=True)
class _Existing:
    id: int
    digest: str
    labels: dict
    public_id: str
    revision: int


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
            timed_pass=p["row"].timed_pass,
            metric=p["row"].metric,
            family=p["protocol"].family,
            sweep_name=p["row"].sweep_name,
        )
        for key, p in wanted.items()
        if key not in groups
    ]
    ComparisonGroup.objects.bulk_create(missing, batch_size=1000)
    if missing:
        groups.update({g.key: g for g in ComparisonGroup.objects.filter(key__in=list(wanted))})
    return groups

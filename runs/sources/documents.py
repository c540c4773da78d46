"""The documents records refer to (GPU, benchmark, workload, protocol, environment,
implementation), each get-or-create by its natural key or digest.

An ingest resolves them through one `Resolver`: for each file, the keys it has not seen yet
are built, digested, looked up and created in bulk, a few queries per kind of document however
many rows refer to them.
"""

from __future__ import annotations

from collections import defaultdict

from runs.manifest import documents
from runs.manifest.canonical import document_digest
from runs.models import Benchmark, Environment, Gpu, Implementation, Project, Protocol, Workload
from runs.reference import catalogue
from runs.sources.base import Doc, IngestError, Record


def _gpu_fields(spec: catalogue.GpuSpec) -> dict:
    return {
        "slug": spec.slug,
        "vendor": spec.vendor,
        "product": spec.product,
        "form_factor": spec.form_factor,
        "architecture": spec.architecture,
        "memory_gib": spec.memory_gib,
        "peak_bandwidth_gbs": spec.peak_bandwidth_gbs,
        "peak_bf16_tflops": spec.peak_bf16_tflops,
        "gpu_class": spec.gpu_class,
    }


def gpu_ensure(spec: catalogue.GpuSpec) -> Gpu:
    gpu, _ = Gpu.objects.get_or_create(upstream_name=spec.upstream_name, defaults=_gpu_fields(spec))
    return gpu


def _document_ensure(model, kind: str, **fields):
    obj, _ = model.objects.get_or_create(
        digest=document_digest(kind, fields["spec"]), defaults=fields
    )
    return obj


def _workload_fields(benchmark: Benchmark, params: dict, name: str, label: str, spec: dict):
    inputs = spec.get("inputs")
    return {
        "name": name[:120],
        "title": f"{benchmark.title} · {label}"[:200],
        "spec": spec,
        "benchmark": benchmark,
        "slug": catalogue.workload_slug(params)[:200],
        "label": label[:300],
        "parameters": params,
        "tensors": inputs if isinstance(inputs, list) else [],
        "dtype": str(params.get("dtype", ""))[:16],
    }


def workload_ensure(*, benchmark: Benchmark, params: dict) -> Workload:
    """The Liger-style Workload document of these parameters, created on first use."""
    name, label, spec, _ = documents.workload_spec(benchmark.slug, params)
    return _document_ensure(
        Workload, "Workload", **_workload_fields(benchmark, params, name, label, spec)
    )


def _project_fields(provider_key: str) -> tuple[str, dict]:
    prov = catalogue.provider(provider_key)
    return prov.project_slug, {"name": prov.project_name, "url": prov.project_url}


def _implementation_fields(provider_key: str, revision: str, project: Project) -> dict:
    name, title, spec = documents.implementation_spec(provider_key, revision)
    return {
        "name": name,
        "title": title[:200],
        "spec": spec,
        "project": project,
        "display_name": catalogue.provider(provider_key).display_name[:120],
        "provider_key": provider_key,
        "revision": revision,
    }


def implementation_ensure(*, provider_key: str, revision: str) -> Implementation:
    """The Implementation document of a provider at a revision, with its project."""
    slug, defaults = _project_fields(provider_key)
    project, _ = Project.objects.get_or_create(slug=slug, defaults=defaults)
    return _document_ensure(
        Implementation, "Implementation", **_implementation_fields(provider_key, revision, project)
    )


def _protocol_fields(doc: Doc, timed_pass: str, metric: str) -> dict:
    name, title, spec = doc.build()
    return {
        "name": name[:120],
        "title": title[:200],
        "spec": spec,
        "family": spec["comparability"]["family"],
        "harness": spec["harness"]["name"],
        "timer": spec["measurement"]["timer"],
        "primary_statistic": spec["measurement"]["primaryStatistic"],
        "timed_pass": timed_pass,
        "metric": metric,
    }


def _environment_fields(doc: Doc, gpu: Gpu) -> dict:
    name, title, spec = doc.build()
    return {"name": name[:120], "title": title[:200], "spec": spec, "gpu": gpu}


def _bulk_ensure(model, field: str, wanted: dict[str, dict]) -> dict:
    """get_or_create for many rows at once: those of `model` whose unique `field` is a key of
    `wanted`, the missing ones created from its fields. Two queries, however many rows."""
    found = model.objects.in_bulk(list(wanted), field_name=field)
    missing = [model(**{field: k}, **fields) for k, fields in wanted.items() if k not in found]
    if missing:
        made = model.objects.bulk_create(missing, batch_size=1000)
        found.update({getattr(obj, field): obj for obj in made if obj.pk is not None})
        if len(found) < len(wanted):  # a backend that cannot return ids from a bulk insert
            found.update(
                model.objects.in_bulk([k for k in wanted if k not in found], field_name=field)
            )
    return found


class Resolver:
    """The documents records refer to, resolved once per key per ingest: for each file, the
    keys not seen yet are built, digested, looked up and created in bulk, a few queries per
    kind of document however many rows refer to them. One resolver may serve many files of
    one ingest (35 CI runs share most documents); it is only reused after a file committed,
    since a failing file ends it. It holds what grows with distinct documents and cells,
    never with rows or files."""

    def __init__(self) -> None:
        self.cache: dict[tuple, object] = {}

    @staticmethod
    def keys(r: Record) -> tuple[tuple, ...]:
        """The cache keys of a record's gpu, benchmark, workload, protocol, environment and
        implementation, in that order."""
        return (
            ("gpu", r.gpu_name),
            ("benchmark", r.benchmark),
            ("workload", *r.workload.key),
            ("protocol", *r.protocol.key),
            ("environment", *r.environment.key),
            ("implementation", r.provider, r.revision),
        )

    def resolve(self, missing: dict[tuple, Record], where: str) -> None:
        """Fill the cache for these keys (each with the first record that names it)."""
        kinds: dict[str, dict[tuple, Record]] = defaultdict(dict)
        for key, r in missing.items():
            kinds[key[0]][key] = r
        cache = self.cache
        specs = {}
        for key, r in kinds["gpu"].items():
            spec = specs[key] = catalogue.GPUS.get(r.gpu_name)
            if spec is None:
                raise IngestError(where, [(r.line, f"GPU {r.gpu_name!r} is not in the catalogue")])
        gpus = _bulk_ensure(
            Gpu, "upstream_name", {s.upstream_name: _gpu_fields(s) for s in specs.values()}
        )
        for key, spec in specs.items():
            cache[key] = gpus[spec.upstream_name]
        titles = {
            r.benchmark: {
                "title": (r.benchmark_title or catalogue.benchmark_title(r.benchmark))[:200]
            }
            for r in kinds["benchmark"].values()
        }
        benchmarks = _bulk_ensure(Benchmark, "slug", titles)
        for key, r in kinds["benchmark"].items():
            cache[key] = benchmarks[r.benchmark]
        projects = _bulk_ensure(
            Project,
            "slug",
            dict(_project_fields(r.provider) for r in kinds["implementation"].values()),
        )
        self._documents(
            Implementation, "Implementation", kinds["implementation"],
            lambda r: _implementation_fields(
                r.provider, r.revision, projects[_project_fields(r.provider)[0]]
            ),
        )  # fmt: skip
        self._documents(
            Workload, "Workload", kinds["workload"],
            lambda r: _workload_fields(
                cache[("benchmark", r.benchmark)], r.params, *r.workload.build()
            ),
        )  # fmt: skip
        self._documents(
            Protocol, "BenchmarkProtocol", kinds["protocol"],
            lambda r: _protocol_fields(r.protocol, r.timed_pass, r.metric),
        )  # fmt: skip
        self._documents(
            Environment, "ExecutionEnvironment", kinds["environment"],
            lambda r: _environment_fields(r.environment, cache[("gpu", r.gpu_name)]),
        )  # fmt: skip

    def _documents(self, model, kind: str, keys: dict[tuple, Record], fields) -> None:
        wanted: dict[str, dict] = {}
        digests: dict[tuple, str] = {}
        for key, r in keys.items():
            built = fields(r)
            digest = digests[key] = document_digest(kind, built["spec"])
            wanted.setdefault(digest, built)
        found = _bulk_ensure(model, "digest", wanted)
        for key, digest in digests.items():
            self.cache[key] = found[digest]

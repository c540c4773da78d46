"""factory_boy factories for the run data model. Runs get real digests from the same builders
the ingest uses, so a factory run's manifest is as canonical as an imported one."""

from __future__ import annotations

from datetime import UTC, datetime

import factory

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
    history_key,
)
from runs.reference import catalogue
from runs.sources.documents import implementation_ensure, workload_ensure


class SourceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Source
        django_get_or_create = ("slug",)

    slug = "liger-kernel-bench"
    name = "Liger-Kernel benchmarks"
    license = "BSD-2-Clause"


class PublicationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Publication
        django_get_or_create = ("source", "slug")

    source = factory.SubFactory(SourceFactory)
    slug = "all_benchmark_data.csv"


class GpuFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Gpu
        django_get_or_create = ("upstream_name",)

    upstream_name = "NVIDIA H100 80GB HBM3"
    slug = "nvidia-h100-80gb-hbm3"
    vendor = "nvidia"
    product = "NVIDIA H100"
    form_factor = "80GB HBM3"
    architecture = "sm_90"
    memory_gib = 80
    peak_bandwidth_gbs = 3350
    peak_bf16_tflops = 989.4
    gpu_class = "h100"


class BenchmarkFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Benchmark
        django_get_or_create = ("slug",)

    slug = "llama4_rope"
    title = factory.LazyAttribute(lambda o: catalogue.benchmark_title(o.slug))


class ProjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Project
        django_get_or_create = ("slug",)

    slug = "transformers"
    name = "Hugging Face Transformers"


def workload_for(benchmark: Benchmark, **params) -> Workload:
    params = params or {"seq": 4096, "hidden": 8192, "q_heads": 32, "kv_heads": 8, "dtype": "bf16"}
    return workload_ensure(benchmark=benchmark, params=params)


def protocol_for(timed_pass: str = "forward", metric: str = "latency") -> Protocol:
    name, title, spec = documents.protocol_spec(timed_pass, metric)
    obj, _ = Protocol.objects.get_or_create(
        digest=document_digest("BenchmarkProtocol", spec),
        defaults={
            "name": name,
            "title": title,
            "spec": spec,
            "family": documents.LIGER_FAMILY,
            "harness": spec["harness"]["name"],
            "timer": spec["measurement"]["timer"],
            "timed_pass": timed_pass,
            "metric": metric,
        },
    )
    return obj


def environment_for(gpu: Gpu) -> Environment:
    name, title, spec = documents.environment_spec(catalogue.GPUS[gpu.upstream_name])
    obj, _ = Environment.objects.get_or_create(
        digest=document_digest("ExecutionEnvironment", spec),
        defaults={"name": name, "title": title, "spec": spec, "gpu": gpu},
    )
    return obj


def implementation_for(
    provider_key: str = "huggingface", revision: str = "unknown"
) -> Implementation:
    return implementation_ensure(provider_key=provider_key, revision=revision)


class RunFactory(factory.django.DjangoModelFactory):
    """A latency run; pass provider=, median= (ns), timed_pass=, params via workload=."""

    class Meta:
        model = Run
        exclude = ("provider", "gpu")

    provider = "huggingface"
    gpu = factory.SubFactory(GpuFactory)
    source = factory.SubFactory(SourceFactory)
    publication = factory.LazyAttribute(lambda o: PublicationFactory(source=o.source))
    benchmark = factory.SubFactory(BenchmarkFactory)
    implementation = factory.LazyAttribute(lambda o: implementation_for(o.provider))
    workload = factory.LazyAttribute(lambda o: workload_for(o.benchmark))
    timed_pass = "forward"
    metric = "latency"
    protocol = factory.LazyAttribute(lambda o: protocol_for(o.timed_pass, o.metric))
    environment = factory.LazyAttribute(lambda o: environment_for(o.gpu))
    unit = "ns"
    median = factory.Sequence(lambda n: 100_000 + 1_000 * n)
    p20 = factory.LazyAttribute(lambda o: o.median - 500)
    p80 = factory.LazyAttribute(lambda o: o.median + 500)
    source_metrics = factory.LazyAttribute(
        lambda o: {"ms_20": o.p20 / 1e6, "ms_50": o.median / 1e6, "ms_80": o.p80 / 1e6}
    )
    sweep_name = "seq"
    sweep_value = 4096
    observed_at = datetime(2025, 8, 7, 21, 42, 12, tzinfo=UTC)
    labels = factory.LazyFunction(lambda: {"liger_version": "0.6.1"})
    external_id = factory.Sequence(lambda n: f"test/forward/run-{n}")
    public_id = factory.Sequence(lambda n: f"{n:08x}")
    name = factory.LazyAttribute(lambda o: f"test-{o.public_id}")
    title = factory.LazyAttribute(lambda o: f"{o.benchmark.title} · {o.provider} · {o.timed_pass}")
    spec = factory.LazyAttribute(
        lambda o: {
            "status": "passed",
            "timing": {"latencyNs": {"median": o.median}, "primaryStatistic": "median"},
            "sourceNative": {"source": o.source.slug, "externalId": o.external_id},
            "protocolDigest": o.protocol.digest,
            "workloadDigest": o.workload.digest,
            "environmentDigest": o.environment.digest,
            "implementationDigest": o.implementation.digest,
        }
    )
    digest = factory.LazyAttribute(lambda o: document_digest("BenchmarkRun", o.spec))
    group = factory.LazyAttribute(lambda o: group_for(o))
    # As the pipeline writes it (runs.models.history_key): what the cell's history follows.
    history_key = factory.LazyAttribute(
        lambda o: history_key(o.group.cell_key, o.implementation.provider_key)
    )
    rank = None


def group_for(o) -> ComparisonGroup:
    cell = {
        "benchmark": o.benchmark.slug,
        "pass": o.timed_pass,
        "metric": o.metric,
        "workloadDigest": o.workload.digest,
        "environmentDigest": o.environment.digest,
        "family": o.protocol.family,
        "sweep": o.sweep_name,
    }
    key = sha256_digest({**cell, "publication": f"{o.source.slug}/{o.publication.slug}"})
    group, _ = ComparisonGroup.objects.get_or_create(
        key=key,
        defaults={
            "cell_key": sha256_digest(cell),
            "publication": o.publication,
            "benchmark": o.benchmark,
            "workload": o.workload,
            "environment": o.environment,
            "timed_pass": o.timed_pass,
            "metric": o.metric,
            "family": o.protocol.family,
            "sweep_name": o.sweep_name,
        },
    )
    return group

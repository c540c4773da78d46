"""API shapes. No logic here: values come from the models as stored."""

from __future__ import annotations

from rest_framework import serializers

from kilib.origin import absolute
from runs.models import Benchmark, ComparisonGroup, Environment, Gpu, Run, Source


class SiteUrlField(serializers.URLField):
    """An absolute link to a page, from the site's one origin (kilib/origin.py)."""

    def __init__(self, **kwargs):
        super().__init__(source="get_absolute_url", read_only=True, **kwargs)

    def to_representation(self, value: str) -> str:
        return absolute(value)


class GpuSerializer(serializers.ModelSerializer):
    class Meta:
        model = Gpu
        fields = [
            "slug",
            "upstream_name",
            "vendor",
            "product",
            "form_factor",
            "architecture",
            "memory_gib",
            "peak_bandwidth_gbs",
            "peak_bf16_tflops",
        ]


class RunSerializer(serializers.ModelSerializer):
    url = SiteUrlField()
    benchmark = serializers.CharField(source="benchmark.slug")
    implementation = serializers.CharField(source="implementation.display_name")
    provider = serializers.CharField(source="implementation.provider_key")
    workload = serializers.CharField(source="workload.label")
    parameters = serializers.JSONField(source="workload.parameters")
    gpu = serializers.CharField(source="environment.gpu.slug")
    source = serializers.CharField(source="source.slug")
    publication = serializers.CharField(source="publication.slug")
    comparison_key = serializers.CharField(source="group.key")
    # What `median` holds: the source's primary statistic (KernelBench reports a mean).
    statistic = serializers.CharField(source="protocol.primary_statistic")

    class Meta:
        model = Run
        fields = [
            "public_id",
            "revision",
            "url",
            "benchmark",
            "implementation",
            "provider",
            "workload",
            "parameters",
            "gpu",
            "timed_pass",
            "metric",
            "unit",
            "median",
            "statistic",
            "p20",
            "p80",
            "rank",
            "evidence",
            "source",
            "publication",
            "external_id",
            "observed_at",
            "digest",
            "comparison_key",
            "sweep_name",
            "sweep_value",
        ]
        # The API reads runs; nothing it exposes writes them, and evidence above all moves
        # only through runs.evidence.
        read_only_fields = fields


class RunDetailSerializer(RunSerializer):
    source_metrics = serializers.JSONField()
    labels = serializers.JSONField()
    protocol_digest = serializers.CharField(source="protocol.digest")
    workload_digest = serializers.CharField(source="workload.digest")
    environment_digest = serializers.CharField(source="environment.digest")
    implementation_digest = serializers.CharField(source="implementation.digest")
    manifest = serializers.SerializerMethodField()

    class Meta(RunSerializer.Meta):
        fields = [
            *RunSerializer.Meta.fields,
            "status",
            "source_metrics",
            "labels",
            "protocol_digest",
            "workload_digest",
            "environment_digest",
            "implementation_digest",
            "manifest",
        ]

    def get_manifest(self, obj) -> str:
        return obj.get_absolute_url().removesuffix("/") + ".json"


class BenchmarkSerializer(serializers.ModelSerializer):
    # The upstream name as the source spells it ("dyt_beta=False"), not a slug pattern.
    slug = serializers.CharField(read_only=True)
    url = SiteUrlField()
    runs = serializers.IntegerField(source="n", read_only=True)

    class Meta:
        model = Benchmark
        fields = ["slug", "title", "url", "runs"]


class RankedRunSerializer(serializers.ModelSerializer):
    implementation = serializers.CharField(source="implementation.display_name")

    class Meta:
        model = Run
        fields = ["rank", "public_id", "implementation", "median", "p20", "p80", "unit", "evidence"]
        read_only_fields = fields


class GroupSerializer(serializers.ModelSerializer):
    benchmark = serializers.CharField(source="benchmark.slug")
    workload = serializers.CharField(source="workload.label")
    gpu = serializers.CharField(source="environment.gpu.slug")
    publication = serializers.CharField(source="publication.slug")
    url = SiteUrlField()

    class Meta:
        model = ComparisonGroup
        fields = [
            "key",
            "cell_key",
            "url",
            "benchmark",
            "timed_pass",
            "metric",
            "workload",
            "gpu",
            "family",
            "sweep_name",
            "publication",
            "size",
        ]


class GroupDetailSerializer(GroupSerializer):
    runs = RankedRunSerializer(many=True, source="ranked_runs")

    class Meta(GroupSerializer.Meta):
        fields = [*GroupSerializer.Meta.fields, "runs"]


class SourceSerializer(serializers.ModelSerializer):
    url = SiteUrlField()

    class Meta:
        model = Source
        fields = [
            "slug",
            "name",
            "description",
            "license",
            "homepage",
            "harness_repository",
            "published_date",
            "url",
        ]


class EnvironmentSerializer(serializers.ModelSerializer):
    gpu = GpuSerializer()

    class Meta:
        model = Environment
        fields = ["digest", "name", "title", "spec", "gpu"]

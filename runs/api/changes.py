"""The detected changes in the API: /api/v1/changes/, filtered like the source's changes page
(docs/changes.md has the rule). Slugs resolve to ids first, so every filter reaches an
index of CellChange.Meta."""

from __future__ import annotations

import django_filters
from django.utils.decorators import method_decorator
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import generics, serializers

from kernelindex.origin import site_root
from runs.api.views import StrictCursorPagination, StrictQueryMixin
from runs.changes.models import CellChange
from runs.models import Benchmark, Source
from runs.read.page_cache import public_page


class ChangeFilter(django_filters.FilterSet):
    source = django_filters.CharFilter(method="_source", help_text="Source slug")
    benchmark = django_filters.CharFilter(method="_benchmark", help_text="Benchmark slug")
    publication = django_filters.CharFilter(
        field_name="publication__slug", help_text="Publication slug (CI run), e.g. 7644a0f"
    )
    kind = django_filters.ChoiceFilter(
        choices=CellChange._meta.get_field("kind").choices,
        help_text="step (reported), transient (back within a few publications), outlier "
        "(reverted at the next publication), pending",
    )
    direction = django_filters.ChoiceFilter(choices=CellChange._meta.get_field("direction").choices)
    grouped = django_filters.BooleanFilter(
        help_text="Moved with at least 10 cells of 3 kernels at one publication"
    )

    class Meta:
        model = CellChange
        fields: list[str] = []

    def _source(self, queryset, name, value):
        return queryset.filter(source_id__in=Source.objects.filter(slug=value).values("id"))

    def _benchmark(self, queryset, name, value):
        return queryset.filter(
            benchmark_id__in=list(Benchmark.objects.filter(slug=value).values_list("id", flat=True))
        )


class ChangeSerializer(serializers.ModelSerializer):
    run = serializers.CharField(source="run.public_id", help_text="The run at the publication")
    url = serializers.SerializerMethodField(help_text="The run page, its history section")
    source = serializers.CharField(source="source.slug")
    benchmark = serializers.CharField(source="benchmark.slug")
    implementation = serializers.CharField(source="provider_key", help_text="Provider key")
    timed_pass = serializers.CharField(source="run.timed_pass")
    metric = serializers.CharField(source="run.metric")
    workload = serializers.CharField(source="run.workload.slug")
    gpu = serializers.CharField(source="run.environment.gpu.slug")
    publication = serializers.CharField(source="publication.slug")
    upstream_commit = serializers.CharField(source="publication.upstream_commit")
    previous = serializers.CharField(
        source="previous.slug", help_text="The cell's publication before this one"
    )
    until = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, help_text="A transient's last publication off its level"
    )
    unit = serializers.CharField(source="run.unit", help_text="ns (latency) or B (memory)")
    shift = serializers.FloatField(help_text="(after - before) / before")

    class Meta:
        model = CellChange
        fields = [
            "run", "url", "source", "benchmark", "implementation", "timed_pass", "metric",
            "workload", "gpu", "publication", "upstream_commit", "previous", "kind",
            "until", "direction", "before", "after", "unit", "shift", "threshold", "grouped",
        ]  # fmt: skip

    @extend_schema_field(serializers.URLField())
    def get_url(self, change: CellChange) -> str:
        return f"{site_root()}{change.run.get_absolute_url()}#history"


@method_decorator(public_page, name="dispatch")
@extend_schema(
    summary="List detected changes",
    description=(
        "Where a cell's median moved between consecutive publications of a source beyond its "
        "own history's spread (docs/changes.md): steps (regressions, improvements), transients "
        "(excursions that came back, with `until`), outliers that reverted at the next "
        "publication, and pending points. Newest first."
    ),
)
class ChangeList(StrictQueryMixin, generics.ListAPIView):
    serializer_class = ChangeSerializer
    filterset_class = ChangeFilter
    pagination_class = StrictCursorPagination

    def get_queryset(self):
        return CellChange.objects.with_related()

"""The run filters shared by the browse page, the API list and the bulk export.

Every filter lands on an indexed column of runs_run: foreign keys are indexed by Django, the
choice columns by 0003_read_indexes. Text filters (free-text search, slugs of related rows)
are resolved against the small catalogue tables first and reach runs_run as an indexed
`IN (...)` on a foreign key, never as a LIKE over the run table.
"""

from __future__ import annotations

import django_filters
from django.db.models import Q

from runs.models import (
    Benchmark,
    Environment,
    Evidence,
    Implementation,
    Metric,
    Run,
    TimedPass,
    Workload,
)

ORDERINGS = {
    "median": "median",
    "observed": "observed_at",
    "rank": "rank",
    "imported": "created_at",
}


class RunFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(
        method="search", label="Search", help_text="Benchmark or implementation name"
    )
    benchmark = django_filters.CharFilter(method="by_benchmark", label="Benchmark (slug)")
    implementation = django_filters.CharFilter(
        method="by_implementation", label="Implementation (provider key, e.g. liger)"
    )
    gpu = django_filters.CharFilter(method="by_gpu", label="GPU (slug)")
    timed_pass = django_filters.ChoiceFilter(
        choices=TimedPass.choices, label="Timed pass", empty_label="any"
    )
    metric = django_filters.ChoiceFilter(choices=Metric.choices, empty_label="any")
    dtype = django_filters.CharFilter(method="by_dtype", label="Data type (bf16, fp32, ...)")
    source = django_filters.CharFilter(field_name="source__slug", label="Source (slug)")
    evidence = django_filters.ChoiceFilter(
        choices=Evidence.choices, label="Evidence level", empty_label="any"
    )
    ordering = django_filters.OrderingFilter(
        fields=[(v, k) for k, v in ORDERINGS.items()],
        label="Sort by",
        empty_label="newest observed",
    )

    class Meta:
        model = Run
        fields: list[str] = []

    def search(self, queryset, name, value):
        value = value.strip()[:100]
        if not value:
            return queryset
        benchmarks = Benchmark.objects.filter(Q(title__icontains=value) | Q(slug__icontains=value))
        implementations = Implementation.objects.filter(
            Q(display_name__icontains=value) | Q(provider_key__icontains=value)
        )
        return queryset.filter(
            Q(benchmark__in=benchmarks.values("id"))
            | Q(implementation__in=implementations.values("id"))
        )

    def by_benchmark(self, queryset, name, value):
        return queryset.filter(benchmark__in=Benchmark.objects.filter(slug=value).values("id"))

    def by_implementation(self, queryset, name, value):
        return queryset.filter(
            implementation__in=Implementation.objects.filter(provider_key=value).values("id")
        )

    def by_gpu(self, queryset, name, value):
        return queryset.filter(
            environment__in=Environment.objects.filter(gpu__slug=value).values("id")
        )

    def by_dtype(self, queryset, name, value):
        return queryset.filter(workload__in=Workload.objects.filter(dtype=value).values("id"))

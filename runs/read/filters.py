"""The run filters shared by the browse page, the API list and the bulk export.

Every filter lands on an indexed column of runs_run (Run.Meta.indexes). Text filters (free-text
search, slugs of related rows) are resolved against the small catalogue tables first and reach
runs_run as an indexed `IN (...)` on a foreign key, never as a LIKE over the run table. Slugs of
benchmarks, GPUs, sources and providers are matched in a small indexed query of their own; data
types and free text likewise, their result kept under the run data's version for each value.

Each is resolved into a list of ids, not left as a subquery: PostgreSQL
cannot combine `a IN (SELECT ...) OR b IN (SELECT ...)` with indexes (it filters every row of
runs_run), while an OR of literal id lists is a BitmapOr of the foreign-key indexes, or a walk
down the sort index when the text matches most runs. The catalogue tables are a few hundred
rows each, so matching inside them costs little whatever the number of runs, and nothing is
denormalised onto runs_run for ingest to keep up to date.
"""

from __future__ import annotations

import hashlib

import django_filters
from django.db.models import Q, Value

from runs.models import (
    Benchmark,
    Environment,
    Evidence,
    Gpu,
    Implementation,
    Metric,
    Run,
    Source,
    TimedPass,
    Workload,
)
from runs.read.freshness import DATA, cached

ORDERINGS = {
    "median": "median",
    "observed": "observed_at",
    "rank": "rank",
    "imported": "created_at",
}


def _catalogue_ids(name: str, value: str, rows) -> list[int]:
    """Ids of the catalogue rows a filter names (a slug, a provider key): a small indexed query
    of their own, so the run query gets them as a literal list; kept under the run data's
    version, which every catalogue write moves. A name that matches nothing is not kept: a
    client can send any number of those."""
    key = f"ids:{name}:" + hashlib.sha256(value.encode()).hexdigest()
    return cached(key, [DATA], lambda: _ids(rows), keep=bool)


def _ids(rows) -> list[int]:
    # In a query of their own: with the ids inline, the planner reads from runs_run's
    # statistics how many runs each one has. Behind a subquery it guesses, and at a million
    # runs it guessed a bitmap over the 400,000 runs of one GPU (3.9 s) for a page of 50.
    return list(rows.order_by().values_list("id", flat=True))


# Where free text is looked for: (foreign key on runs_run, catalogue rows whose text matches).
def _search_sources(value: str) -> list[tuple[str, object]]:
    return [
        (
            "benchmark",
            Benchmark.objects.filter(Q(title__icontains=value) | Q(slug__icontains=value)),
        ),
        (
            "implementation",
            Implementation.objects.filter(
                Q(display_name__icontains=value) | Q(provider_key__icontains=value)
            ),
        ),
        (
            "environment",
            Environment.objects.filter(
                gpu__in=Gpu.objects.filter(
                    Q(upstream_name__icontains=value) | Q(slug__icontains=value)
                ).values("id")
            ),
        ),
        ("workload", Workload.objects.filter(label__icontains=value)),
    ]


def search_condition(value: str) -> Q:
    """Runs whose benchmark, implementation, GPU or workload matches `value`, as literal id
    lists on runs_run's indexed foreign keys. The lists come from one query over the catalogue
    tables, kept under the run data's version for each text searched (they change only with the data)."""
    key = hashlib.sha256(value.encode()).hexdigest()
    ids = cached(f"search:{key}", [DATA], lambda: _search_ids(value))
    if not ids:
        return Q(pk__in=[])
    condition = Q()
    for column, pks in ids.items():
        condition |= Q(**{f"{column}_id__in": pks})
    return condition


def _search_ids(value: str) -> dict[str, list[int]]:
    parts = [
        rows.order_by().annotate(column=Value(column)).values_list("column", "id")
        for column, rows in _search_sources(value)
    ]
    ids: dict[str, list[int]] = {}
    for column, pk in parts[0].union(*parts[1:], all=True):
        ids.setdefault(column, []).append(pk)
    return ids


class RunFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(
        method="search",
        label="Search",
        help_text="Part of a benchmark, implementation, GPU or workload name",
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
    source = django_filters.CharFilter(method="by_source", label="Source (slug)")
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
        return queryset.filter(search_condition(value))

    def by_benchmark(self, queryset, name, value):
        ids = _catalogue_ids(name, value, Benchmark.objects.filter(slug=value))
        return queryset.filter(benchmark_id__in=ids)

    def by_implementation(self, queryset, name, value):
        ids = _catalogue_ids(name, value, Implementation.objects.filter(provider_key=value))
        return queryset.filter(implementation_id__in=ids)

    def by_gpu(self, queryset, name, value):
        ids = _catalogue_ids(name, value, Environment.objects.filter(gpu__slug=value))
        return queryset.filter(environment_id__in=ids)

    def by_dtype(self, queryset, name, value):
        # Workloads are hundreds, and more with every new shape: their ids per data type are
        # kept under the run data's version.
        key = "dtype:" + hashlib.sha256(value.encode()).hexdigest()
        ids = cached(key, [DATA], lambda: _ids(Workload.objects.filter(dtype=value)), keep=bool)
        return queryset.filter(workload_id__in=ids)

    def by_source(self, queryset, name, value):
        ids = _catalogue_ids(name, value, Source.objects.filter(slug=value))
        return queryset.filter(source_id__in=ids)

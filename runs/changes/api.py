"""The detected changes in the API: /api/v1/changes/, filtered like the source's changes page
(docs/changes.md has the rule). Slugs resolve to ids first, so every filter reaches an
index of CellChange.Meta."""

from __future__ import annotations

import django_filters
from django.utils.decorators import method_decorator
from drf_spectacular.utils import extend_schema
from rest_framework import generics

from runs.api.base import StrictCursorPagination, StrictQueryMixin
from runs.changes.models import CellChange
from runs.changes.pages import shown
from runs.changes.serializers import ChangeSerializer
from runs.models import Benchmark, Publication, Source
from runs.read.freshness import DATA, cached_many
from runs.read.page_cache import public_page


class ChangeFilter(django_filters.FilterSet):
    source = django_filters.CharFilter(method="_source", help_text="Source slug")
    benchmark = django_filters.CharFilter(method="_benchmark", help_text="Benchmark slug")
    publication = django_filters.CharFilter(
        method="_publication", help_text="Publication slug (CI run), e.g. 7644a0f"
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

    def _publication(self, queryset, name, value):
        # A slug names one publication per source: the ids first, then the index.
        return queryset.filter(
            publication_id__in=list(
                Publication.objects.filter(slug=value).values_list("id", flat=True)
            )
        )

    def _benchmark(self, queryset, name, value):
        return queryset.filter(
            benchmark_id__in=list(Benchmark.objects.filter(slug=value).values_list("id", flat=True))
        )


class ChangeCursorPagination(StrictCursorPagination):
    # Newest publication first by upstream's time (the index cellchange_time and each
    # filter's), never by detection: a re-detection replaces the rows.
    ordering = ("-published_at", "-id")


@method_decorator(public_page, name="dispatch")
@extend_schema(
    summary="List detected changes",
    description=(
        "Where a cell's median moved between consecutive publications of a source beyond its "
        "own history's spread (docs/changes.md): steps (regressions, improvements), transients "
        "(excursions that came back, with `until`), outliers that reverted at the next "
        "publication, and pending points. Newest publication first, by upstream's time."
    ),
)
class ChangeList(StrictQueryMixin, generics.ListAPIView):
    serializer_class = ChangeSerializer
    filterset_class = ChangeFilter
    pagination_class = ChangeCursorPagination

    def get_queryset(self):
        return CellChange.objects.all()

    def list(self, request, *args, **kwargs):
        # The page's ids from the filters' indexes; each change as the list shows it reads the
        # run data only, kept under its version, those not kept loaded in one query.
        page = self.paginate_queryset(
            self.filter_queryset(self.get_queryset()).values("id", "published_at")
        )
        rows = cached_many("api-change", [c["id"] for c in page], [DATA], self._represent)
        # A change recomputed away between the two queries is left out.
        return self.get_paginated_response([rows[c["id"]] for c in page if c["id"] in rows])

    def _represent(self, ids: list[int]) -> dict[int, dict]:
        changes = list(shown(CellChange.objects.filter(pk__in=ids)))
        data = self.get_serializer(changes, many=True).data
        return {change.pk: one for change, one in zip(changes, data, strict=True)}

"""The source's judged claims, as a page and in the API (reversed and overstated first)."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.decorators import method_decorator
from django.views.decorators.http import require_safe
from drf_spectacular.utils import extend_schema
from rest_framework import generics

from runs.api.views import StrictCursorPagination, StrictQueryMixin
from runs.claims.models import JudgedClaim, Verdict
from runs.claims.serializers import JudgedClaimSerializer
from runs.models import Source
from runs.read.page_cache import public_page


def _claims(source: Source):
    return (
        JudgedClaim.objects.filter(source=source)
        .select_related(
            "group__benchmark",
            "group__workload",
            "group__environment__gpu",
            "better__implementation",
            "other__implementation",
            "better_controlled",
            "other_controlled",
        )
        .order_by("severity", "id")
    )


@require_safe
@public_page
def source_claims(request: HttpRequest, slug: str) -> HttpResponse:
    source = get_object_or_404(Source, slug=slug)
    page = Paginator(_claims(source), 100).get_page(request.GET.get("page"))
    counts = {v: 0 for v, _ in Verdict.choices}
    for verdict in JudgedClaim.objects.filter(source=source).values_list("verdict", flat=True):
        counts[verdict] += 1
    return render(
        request,
        "claims/source_claims.html",
        {"source": source, "page": page, "counts": counts},
    )


class ClaimPagination(StrictCursorPagination):
    ordering = ("severity", "id")


@method_decorator(public_page, name="dispatch")
@extend_schema(
    summary="List a source's judged claims",
    description=(
        "Each published ratio between two implementations of one cell (same publication, "
        "workload, GPU, pass and metric) that a controlled rerun of both sides in one runner "
        "process judged: holds, overstated, understated or reversed, within the cells' "
        "combined tolerance. Reversed and overstated first. The published figures are never "
        "edited; a claim is never judged across GPU products."
    ),
)
class SourceClaimList(StrictQueryMixin, generics.ListAPIView):
    serializer_class = JudgedClaimSerializer
    pagination_class = ClaimPagination
    filter_backends: list = []

    def get_queryset(self):
        return _claims(get_object_or_404(Source, slug=self.kwargs["slug"]))

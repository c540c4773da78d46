"""The source's judged claims, as a page and in the API (reversed and overstated first)."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db.models import Count, JSONField
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.utils.decorators import method_decorator
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_safe
from drf_spectacular.utils import extend_schema
from rest_framework import generics

from runs.api.base import StrictCursorPagination, StrictQueryMixin
from runs.claims.models import JudgedClaim, Verdict
from runs.claims.serializers import JudgedClaimSerializer
from runs.models import Run, Source
from runs.read.freshness import DATA, cached, cached_many
from runs.read.page_cache import public_page

CLAIMS_PER_PAGE = 50
# What a claim's row shows besides the claim: its cell, and both sides with their reruns.
CELL = ("group__benchmark", "group__workload", "group__environment__gpu")
SIDES = ("better", "other", "better_controlled", "other_controlled")


def _json(model, paths=()) -> list[str]:
    """The JSON columns of `model` and of the models its select_related `paths` reach (runs'
    metrics and labels, documents' specs): neither the page nor the API shows them, and
    decoding them cost more than the rest of a row."""
    found = {f.name for f in model._meta.concrete_fields if isinstance(f, JSONField)}
    for path in paths:
        target, prefix = model, []
        for name in path.split("__"):
            target, prefix = target._meta.get_field(name).related_model, [*prefix, name]
            found |= {
                "__".join([*prefix, f.name])
                for f in target._meta.concrete_fields
                if isinstance(f, JSONField)
            }
    return sorted(found)


def _with_sides(claims) -> list[JudgedClaim]:
    """The claims with their cells, then the runs of their four sides in one more query: one
    query joining all fourteen tables took PostgreSQL longer to plan than to run, and the
    page's first reader after a data change paid it."""
    claims = list(claims.select_related(*CELL).defer(*_json(JudgedClaim, CELL)))
    ids = {getattr(c, f"{side}_id") for c in claims for side in SIDES}
    runs = (
        Run.objects.filter(pk__in=ids)
        .select_related("implementation")
        .defer(*_json(Run, ["implementation"]))
        .in_bulk()
    )
    for claim in claims:
        for side in SIDES:
            setattr(claim, side, runs[getattr(claim, f"{side}_id")])
    return claims


def _counts(source: Source) -> dict[str, int]:
    """Claims per verdict, every verdict named (one grouped count on the source's index)."""
    counts = {v: 0 for v, _ in Verdict.choices}
    rows = (
        JudgedClaim.objects.filter(source=source)
        .values_list("verdict")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts.update(dict(rows))
    return counts


def _rows(source: Source, number: int) -> str:
    """Page `number`'s table rows: the claims at that offset of the source's index only."""
    start = (number - 1) * CLAIMS_PER_PAGE
    claims = JudgedClaim.objects.filter(source=source).order_by("severity", "id")
    shown = _with_sides(claims[start : start + CLAIMS_PER_PAGE])
    return mark_safe(render_to_string("claims/_source_claims_rows.html", {"claims": shown}))


@require_safe
@public_page
def source_claims(request: HttpRequest, slug: str) -> HttpResponse:
    source = get_object_or_404(Source, slug=slug)
    # The counts and each page's rows read the run data only: counted and rendered once per
    # data change. The pager counts a range, so it asks nothing; get_page keeps the number
    # within the pages there are, so a client cannot add keys at will.
    counts = cached(f"claims-counts:{source.pk}", [DATA], lambda: _counts(source))
    page = Paginator(range(sum(counts.values())), CLAIMS_PER_PAGE).get_page(request.GET.get("page"))
    rows = cached(
        f"claims-rows:{source.pk}:{page.number}", [DATA], lambda: _rows(source, page.number)
    )
    return render(
        request,
        "claims/source_claims.html",
        {"source": source, "page": page, "counts": counts, "rows": rows},
    )


class ClaimPagination(StrictCursorPagination):
    ordering = ("severity", "id")


@method_decorator(public_page, name="dispatch")
@extend_schema(
    summary="List a source's judged claims",
    description=(
        "Each published ratio between two implementations of one cell (same publication, "
        "workload, GPU, pass and metric) that a controlled rerun of both sides in one runner "
        "process judged on the basis it was published on (latency: wall-clock do_bench, the "
        "device-time ratio beside it in device_ratio; memory: the peak): holds, overstated, "
        "understated or reversed within the cells' combined tolerance, and a published ratio "
        "within that tolerance of 1 a tie, confirmed or broken. Ratios are other / claimed-"
        "better. Reversed and overstated first. The published figures are never edited; a "
        "claim is never judged across GPU products."
    ),
)
class SourceClaimList(StrictQueryMixin, generics.ListAPIView):
    serializer_class = JudgedClaimSerializer
    pagination_class = ClaimPagination
    filter_backends: list = []

    def get_queryset(self):
        source = get_object_or_404(Source, slug=self.kwargs["slug"])
        return JudgedClaim.objects.filter(source=source).order_by("severity", "id")

    def list(self, request, *args, **kwargs):
        # The page's ids and sort keys from the source's index; each claim as the list shows
        # it reads the run data only, kept under its version, those not kept loaded in one
        # query.
        page = self.paginate_queryset(self.get_queryset().values("id", "severity"))
        shown = cached_many("api-claim", [c["id"] for c in page], [DATA], self._represent)
        # A claim re-judged away between the two queries is left out.
        return self.get_paginated_response([shown[c["id"]] for c in page if c["id"] in shown])

    def _represent(self, ids: list[int]) -> dict[int, dict]:
        claims = _with_sides(JudgedClaim.objects.filter(pk__in=ids))
        data = self.get_serializer(claims, many=True).data
        return {claim.pk: one for claim, one in zip(claims, data, strict=True)}

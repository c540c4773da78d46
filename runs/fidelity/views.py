"""The source's fidelity table, as a page and in the API (data/fidelity/<source>.json)."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils.decorators import method_decorator
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_safe
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from runs.api.base import StrictQueryMixin
from runs.fidelity import table as fidelity
from runs.fidelity.serializers import FidelityTableSerializer
from runs.models import Source
from runs.read.freshness import DATA, cached
from runs.read.page_cache import public_page


def _source(slug: str) -> Source:
    source = Source.objects.filter(slug=slug).first()
    if source is None:
        raise Http404("No source has this name; the sources are listed on the home page.")
    return source


def _table(source: Source) -> dict:
    data = fidelity.table(source.slug)
    if data is None:
        return {"source": source.slug, "measured": False, "rows": []}
    rows = [
        {
            **r,
            "url": fidelity.page_url(source.slug, r["anchor"]),
            "upstreamCommits": fidelity.measured_at(source.slug, r),
        }
        for r in data["rows"]
    ]
    changes = fidelity.script_changes(source.slug)
    return {**data, "measured": True, "rows": rows, "scriptChanges": changes}


def _counts(rows: list[dict]) -> dict[str, int]:
    counts = dict.fromkeys(fidelity.STATUS_WORDS.values(), 0)
    for r in rows:
        counts[fidelity.STATUS_WORDS[r["status"]]] += 1
    return counts


def _table_html(source: Source) -> str:
    """The table rendered: a few hundred rows, the same for every reader until the committed
    file or the source changes (the first with a deploy, the second with the run data), so
    it is kept under the data's version like every other page's costly part (0.020 of the
    trivial view rendered each request, uncached at 1M runs, bench/scale.py at 6f8aceaa)."""
    data = _table(source)
    context = {"source": source, "table": data, "counts": _counts(data["rows"])}
    return mark_safe(render_to_string("fidelity/_table.html", context))


@require_safe
@public_page
def source_fidelity(request: HttpRequest, slug: str) -> HttpResponse:
    source = _source(slug)
    table_html = cached(f"fidelity-table:{source.slug}", [DATA], lambda: _table_html(source))
    return render(
        request, "fidelity/source_fidelity.html", {"source": source, "table_html": table_html}
    )


@method_decorator(public_page, name="dispatch")
@extend_schema(
    summary="A source's fidelity table",
    description=(
        "How closely the runner measures what the source's own benchmark script measures, "
        "run on one machine: per kernel, provider, pass and metric the runner/script ratio of "
        "the medians on device-bound latency, on host-bound latency and on peak memory "
        "(median, range, cells), the GPU and date, and a status: established, not "
        "established (with the reason) or not measured. A timing or memory verdict is given "
        "only where it is established."
    ),
    responses=FidelityTableSerializer,
)
class SourceFidelity(StrictQueryMixin, APIView):
    def get(self, request, slug: str):
        source = _source(slug)
        # Kept as the page's table is (_table_html): plain data, serialized once per version.
        data = cached(
            f"fidelity-api:{source.slug}",
            [DATA],
            lambda: dict(FidelityTableSerializer(_table(source)).data),
        )
        return Response(data)

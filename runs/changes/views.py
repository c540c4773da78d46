"""The source's changes page: what the change rule found between consecutive publications."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_safe

from kilib.origin import site_root
from runs.changes import detect
from runs.changes.pages import (
    PUBLICATIONS_PER_PAGE,
    rendered_sections,
    source_publications_with_changes,
    source_summary,
)
from runs.models import Source
from runs.read.freshness import DATA, cached
from runs.read.page_cache import public_page


@require_safe
@public_page
def source_changes(request: HttpRequest, slug: str) -> HttpResponse:
    source = get_object_or_404(Source, slug=slug)
    # The counts and each page's sections read the run data only: counted and rendered once
    # per data change. The pager counts a range, so it asks nothing; get_page keeps the number
    # within the pages there are, so a client cannot add keys at will.
    summary = cached(f"changes-summary:{source.pk}", [DATA], lambda: source_summary(source))
    paginator = Paginator(range(summary["publications"]), PUBLICATIONS_PER_PAGE)
    page = paginator.get_page(request.GET.get("page"))
    start = (page.number - 1) * PUBLICATIONS_PER_PAGE
    sections = cached(
        f"changes-sections:{source.pk}:{page.number}",
        [DATA],
        lambda: rendered_sections(
            list(source_publications_with_changes(source)[start : start + PUBLICATIONS_PER_PAGE])
        ),
    )
    return render(
        request,
        "runs/source_changes.html",
        {
            "source": source,
            "page": page,
            "sections": sections,
            "summary": summary,
            "rule": detect,
            "canonical": site_root() + request.path,
        },
    )

"""The source's changes page: what the change rule found between consecutive publications."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_safe

from kernelindex.origin import site_root
from runs.changes import detect
from runs.changes.pages import (
    PUBLICATIONS_PER_PAGE,
    publications_changes,
    source_publications_with_changes,
    source_summary,
)
from runs.models import Source
from runs.read.page_cache import public_page


@require_safe
@public_page
def source_changes(request: HttpRequest, slug: str) -> HttpResponse:
    source = get_object_or_404(Source, slug=slug)
    paginator = Paginator(source_publications_with_changes(source), PUBLICATIONS_PER_PAGE)
    page = paginator.get_page(request.GET.get("page"))
    return render(
        request,
        "runs/source_changes.html",
        {
            "source": source,
            "page": page,
            "sections": publications_changes(list(page.object_list)),
            "summary": source_summary(source),
            "rule": detect,
            "canonical": site_root() + request.path,
        },
    )

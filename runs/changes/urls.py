"""The URLs of the detected changes: the source's changes page and the Atom feeds
(`urlpatterns`, included by runs/urls.py, so named `runs:...` like the other pages) and the API
list (`api_urlpatterns`, included by runs/api/urls.py, so named `api:changes`)."""

from __future__ import annotations

from django.urls import path

from runs.changes import api, views
from runs.changes.feeds import BenchmarkChangesFeed, CellChangesFeed, SourceChangesFeed
from runs.read.page_cache import public_page

urlpatterns = [
    path("sources/<slug:slug>/changes/", views.source_changes, name="source-changes"),
    path(
        "feeds/sources/<slug:slug>/changes.atom",
        public_page(SourceChangesFeed()),
        name="feed-source-changes",
    ),
    path(
        "feeds/benchmarks/<upstream:slug>/changes.atom",
        public_page(BenchmarkChangesFeed()),
        name="feed-benchmark-changes",
    ),
    path(
        "feeds/runs/<str:public_id>/changes.atom",
        public_page(CellChangesFeed()),
        name="feed-cell-changes",
    ),
]

api_urlpatterns = [
    path("changes/", api.ChangeList.as_view(), name="changes"),
]

from django.urls import include, path

from runs.pages import views
from runs.pages.feeds import latest_runs
from runs.read.page_cache import public_page

app_name = "runs"

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("runs/", views.run_list, name="list"),
    path("runs/<str:public_id>.json", views.run_manifest_json, name="manifest"),
    path("runs/<str:public_id>/", views.run_detail, name="detail"),
    path("runs/<str:public_id>/history/", views.run_history, name="history"),
    path("runs/<str:public_id>/cite.<str:fmt>", views.run_cite, name="cite"),
    path("runs/<str:public_id>/compare/<str:other_id>/", views.run_compare, name="compare"),
    # Upstream kernel names are arbitrary text: runs/pages/converters.py maps each to one segment.
    path("benchmarks/<upstream:slug>/", views.benchmark_detail, name="benchmark"),
    path("groups/<str:key>/", views.group_detail, name="group"),
    path("sources/<slug:slug>/", views.source_detail, name="source"),
    path("sources/<slug:slug>/ledger/", views.source_ledger, name="source-ledger"),
    path("gpus/<slug:slug>/", views.gpu_detail, name="gpu"),
    path("feeds/runs.atom", public_page(latest_runs), name="feed"),
    # Change detection's page and feeds (runs/changes/), named in this namespace.
    path("", include("runs.changes.urls")),
]

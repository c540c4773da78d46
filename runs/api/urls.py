from django.urls import include, path

from runs.api import views
from runs.changes.urls import api_urlpatterns as changes_api

app_name = "api"

urlpatterns = [
    path("", views.api_root, name="root"),
    path("schema/", views.SchemaView.as_view(), name="schema"),
    path("docs/", views.docs, name="docs"),
    path("runs/", views.RunList.as_view(), name="runs"),
    path("runs/lookup/", views.RunLookup.as_view(), name="run-lookup"),
    path("runs/export.csv", views.export_csv, name="export-csv"),
    path("runs/export.jsonl", views.export_jsonl, name="export-jsonl"),
    path("runs/<str:public_id>/", views.RunDetail.as_view(), name="run"),
    path("benchmarks/", views.BenchmarkList.as_view(), name="benchmarks"),
    path("benchmarks/<upstream:slug>/", views.BenchmarkDetail.as_view(), name="benchmark"),
    path("groups/", views.GroupList.as_view(), name="groups"),
    path("groups/<str:key>/", views.GroupDetail.as_view(), name="group"),
    path("sources/", views.SourceList.as_view(), name="sources"),
    path("sources/<slug:slug>/", views.SourceDetail.as_view(), name="source"),
    # Change detection's list (runs/changes/), named in this namespace.
    path("", include(changes_api)),
    path("environments/", views.EnvironmentList.as_view(), name="environments"),
    path("environments/<str:digest>/", views.EnvironmentDetail.as_view(), name="environment"),
]

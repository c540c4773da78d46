from __future__ import annotations

from django.urls import path

from runs.claims import views

app_name = "claims"

urlpatterns = [
    path("sources/<slug:slug>/claims/", views.source_claims, name="source"),
    path("api/v1/sources/<slug:slug>/claims/", views.SourceClaimList.as_view(), name="api-source"),
]

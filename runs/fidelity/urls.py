from __future__ import annotations

from django.urls import path

from runs.fidelity import views

app_name = "fidelity"

urlpatterns = [
    path("sources/<slug:slug>/fidelity/", views.source_fidelity, name="source"),
    path("api/v1/sources/<slug:slug>/fidelity/", views.SourceFidelity.as_view(), name="api-source"),
]

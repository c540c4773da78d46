from django.urls import path

from runs import views

app_name = "runs"

urlpatterns = [
    path("runs/<str:public_id>.json", views.run_manifest_json, name="manifest"),
    path("runs/<str:public_id>/", views.run_detail, name="detail"),
    path("benchmarks/<slug:slug>/", views.benchmark_detail, name="benchmark"),
    path("groups/<str:key>/", views.group_detail, name="group"),
    path("sources/<slug:slug>/", views.source_detail, name="source"),
    path("gpus/<slug:slug>/", views.gpu_detail, name="gpu"),
]

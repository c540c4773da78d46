from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    # read side: the JSON API
    path("api/v1/", include("runs.api.urls")),
    path("", include("runs.urls")),
]

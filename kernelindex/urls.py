from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("runs.urls")),
]

# Controlled reruns (issue 5)
urlpatterns += [
    path("", include("reruns.urls")),
]

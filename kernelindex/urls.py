# --- community: the admin logs in through allauth (rate limits, second factor) ---
from allauth.account.decorators import secure_admin_login
from django.contrib import admin
from django.urls import include, path

from attestations.urls import api_urlpatterns as attestations_api

admin.site.login = secure_admin_login(admin.site.login)
# --- end community ---

urlpatterns = [
    path("admin/", admin.site.urls),
    # --- community ---
    path("accounts/", include("allauth.urls")),
    path("api/v1/", include((attestations_api, "attestations-api"))),
    path("", include("attestations.urls")),
    # --- end community ---
    path("", include("runs.urls")),
]

# Controlled reruns (issue 5)
urlpatterns += [
    path("", include("reruns.urls")),
]

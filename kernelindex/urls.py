from allauth.account.decorators import secure_admin_login
from django.contrib import admin
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path

from attestations.urls import api_urlpatterns as attestations_api

# The admin logs in through allauth, so its rate limits and second factor protect it too.
admin.site.login = secure_admin_login(admin.site.login)
admin.site.site_header = "KernelIndex administration"
admin.site.site_title = "KernelIndex admin"
admin.site.index_title = "Moderation and data"
admin.site.site_url = "/"


def _favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    # Resolved per request, not at import: with hashed static names the manifest exists only
    # after collectstatic, which `manage.py check` must not need.
    return HttpResponsePermanentRedirect(static("favicon.svg"))


urlpatterns = [
    # Browsers ask for /favicon.ico on pages that name no icon (JSON, the feed, the admin).
    path("favicon.ico", _favicon),
    path("admin/", admin.site.urls),
    path("accounts/", include("allauth.urls")),
    path("api/v1/", include("runs.api.urls")),
    path("api/v1/", include((attestations_api, "attestations-api"))),
    path("", include("attestations.urls")),
    path("", include("reruns.urls")),
    path("", include("runs.claims.urls")),
    path("", include("runs.fidelity.urls")),
    path("", include("runs.urls")),
]


# The site's own error pages, with DEBUG on as with it off (kilib/errors.py).
handler404 = "kilib.errors.not_found"
handler500 = "kilib.errors.server_error"

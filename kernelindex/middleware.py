"""Site-wide response and access rules that belong to no single app."""

from __future__ import annotations

from collections.abc import Callable

from allauth.mfa.models import Authenticator
from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse


class ContentSecurityPolicyMiddleware:
    """Every HTML response gets the site's CSP. Pages carry no inline script or style, so a
    strict policy costs nothing and turns any markup that slips past sanitizing into inert text."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        content_type = response.get("Content-Type", "")
        if settings.DEBUG and response.status_code in (404, 500):
            # Under DEBUG these are Django's technical pages, styled inline; the site's own
            # 404 and 500 pages (DEBUG off) keep the policy.
            return response
        if content_type.startswith("text/html") and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = settings.CONTENT_SECURITY_POLICY
        return response


class StaffMfaRequiredMiddleware:
    """Staff must have a TOTP authenticator before they reach the admin.

    The admin logs in through allauth, which asks for the second factor once one exists; this
    closes the gap of a staff account that never set one up: it is sent to the TOTP setup page.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if (
            user is not None
            and user.is_authenticated
            and user.is_staff
            and request.path.startswith(reverse("admin:index"))
            and not _has_totp(user)
        ):
            return HttpResponseRedirect(reverse("mfa_activate_totp"))
        return self.get_response(request)


def _has_totp(user) -> bool:
    return Authenticator.objects.filter(user=user, type=Authenticator.Type.TOTP).exists()

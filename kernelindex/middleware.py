"""Site-wide response and access rules that belong to no single app."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import unquote_plus

from django.conf import settings
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import render
from django.urls import reverse

from attestations import staffmfa


class RejectNulBytesMiddleware:
    """A NUL byte in the path or the query string is a 400 before any view sees it.

    No name, id or filter here can hold one, and PostgreSQL refuses it in text, so without this
    every lookup that passes such a value to the database would answer 500.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        query = request.META.get("QUERY_STRING", "")
        if (
            "\x00" in request.path_info
            or "\x00" in unquote_plus(query)
            or any("\x00" in key for key in request.GET)
        ):
            message = "A NUL byte is not allowed in a URL."
            if request.path_info.startswith("/api/"):
                return JsonResponse({"detail": message}, status=400)
            return HttpResponseBadRequest(message, content_type="text/plain")
        return self.get_response(request)


class AdminSelectionMiddleware:
    """An admin action posted with a selection that names no item (`_selected_action` empty,
    not a number, or beyond the column) is a 400 that says so. Django's changelist filters by
    the raw values and raises ValueError (a 500) on them; this checks them with the model's
    own primary-key field first, for every ModelAdmin, the project's and Django's own."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs):
        model_admin = getattr(view_func, "model_admin", None)
        if model_admin is None or request.method != "POST" or "action" not in request.POST:
            return None
        pk = model_admin.model._meta.pk
        for value in request.POST.getlist(ACTION_CHECKBOX_NAME):
            try:
                pk.clean(value, None)
            except ValidationError:
                return HttpResponseBadRequest(
                    f"The selection names no item: {value[:40]!r} is not an id.",
                    content_type="text/plain",
                )
        return None


class ContentSecurityPolicyMiddleware:
    """Every HTML response gets the site's CSP. Pages carry no inline script or style, so a
    strict policy costs nothing and turns any markup that slips past sanitizing into inert text."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        content_type = response.get("Content-Type", "")
        if content_type.startswith("text/html") and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = settings.CONTENT_SECURITY_POLICY
        return response


class StaffMfaRequiredMiddleware:
    """Staff powers need a session that passed the second factor (attestations/staffmfa.py).

    Without it the request's user is demoted to a contributor for the whole request, so no path
    (admin, reruns, moderation) acts as staff. The admin and the authenticator setup then answer
    a page that says why and what to do, instead of a login loop.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # Without a session cookie nobody is signed in: no need to load a session to know.
        if settings.SESSION_COOKIE_NAME in request.COOKIES:
            staffmfa.acting_staff(request)
            user = request.user
            if staffmfa.is_demoted(user) and self._guarded(request.path):
                enrolled = staffmfa.has_totp(user)
                return render(
                    request, "attestations/staff_mfa.html", {"enrolled": enrolled}, status=403
                )
        return self.get_response(request)

    @staticmethod
    def _guarded(path: str) -> bool:
        # The admin, and the web enrolment of a first authenticator, which must not turn a
        # password alone into staff.
        return path.startswith(reverse("admin:index")) or path == reverse("mfa_activate_totp")


class RequestSizeMiddleware:
    """A request body larger than any form or API call takes (a result file at most, see
    attestations/measured.py) is answered 413 from its Content-Length, before anything reads
    it: the CSRF check would otherwise parse a 10 MB upload before the view could refuse it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        from attestations import measured

        if not measured.request_too_large(request.META.get("CONTENT_LENGTH")):
            return self.get_response(request)
        message = measured.size_refusal().messages[0]
        if request.path_info.startswith("/api/"):
            return JsonResponse({"detail": message}, status=413)
        return render(request, "attestations/refused.html", {"message": message}, status=413)

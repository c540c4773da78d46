"""The community app's request rules: staff powers only after the second factor, and the
upload limit of the result files this app accepts."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse

from attestations import measured, staffmfa


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
        if not measured.request_too_large(request.META.get("CONTENT_LENGTH")):
            return self.get_response(request)
        message = measured.size_refusal().messages[0]
        if request.path_info.startswith("/api/"):
            return JsonResponse({"detail": message}, status=413)
        return render(request, "attestations/refused.html", {"message": message}, status=413)

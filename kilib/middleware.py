"""Site-wide request and response rules that belong to no single app."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import unquote_plus

from django.conf import settings
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse


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

"""Error pages in the site's own words and layout, with DEBUG on as with it off.

Django answers a 404 or a 500 under DEBUG with its technical pages (every URL pattern, the
settings), and off DEBUG its 404 handler names the exception's class ("Resolver404") when no
route matched. Readers of the demo run it with DEBUG on, so both cases come here.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.urls import Resolver404

logger = logging.getLogger("django.request")
# Exceptions Django answers with a 400 or 403 itself (the templates 400.html, 403.html).
HANDLED_BY_DJANGO = (BadRequest, PermissionDenied, SuspiciousOperation)


def _message(exception: Exception | None) -> str:
    """What a view said about the missing thing ("No run has the id …"); nothing for a URL no
    route matches, whose "message" is the resolver's internals."""
    if exception is None or isinstance(exception, Resolver404):
        return ""
    message = exception.args[0] if exception.args else ""
    return message if isinstance(message, str) else ""


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler404. The API answers JSON even for a URL no route matches."""
    message = _message(exception)
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": message or "Not found."}, status=404)
    body = loader.render_to_string("404.html", {"message": message}, request)
    return HttpResponse(body, status=404)


def server_error(request: HttpRequest, detail: str = "") -> HttpResponse:
    """handler500: the page needs no database and no request context, so it cannot fail itself.
    `detail` (the traceback) is shown only under DEBUG, to whoever runs the site."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Server error; it has been logged."}, status=500)
    return HttpResponse(loader.render_to_string("500.html", {"detail": detail}), status=500)


class ErrorPagesMiddleware:
    """Under DEBUG, the site's 404 and 500 pages instead of Django's technical ones; the 500
    page then carries the traceback beneath the site's words. Off DEBUG Django's own handlers
    call not_found and server_error, so this does nothing."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        # No route matched (the resolver raised before any view ran): Django's technical 404.
        if settings.DEBUG and response.status_code == 404 and request.resolver_match is None:
            return not_found(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception):
        if not settings.DEBUG or isinstance(exception, HANDLED_BY_DJANGO):
            return None
        if isinstance(exception, Http404):
            return not_found(request, exception)
        # Returning a response skips Django's own logging of the error: log it here.
        logger.error("Internal Server Error: %s", request.path, exc_info=exception)
        return server_error(request, "".join(traceback.format_exception(exception)))

"""The one origin of every absolute link: citations, feeds, canonical links, API urls and
cursors, emails.

In production that is SITE_ROOT, whatever Host header a request carries (ALLOWED_HOSTS may
admit several names, and a page or an API answer built from the header would hand a
visitor's links to whoever chose it). Under DEBUG with SITE_ROOT unset (the demo, a laptop)
it is the origin the request came to, so links work wherever the site is served.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

from django.conf import settings
from django.http import HttpRequest, HttpResponse

_request_origin: ContextVar[str] = ContextVar("request_origin", default="")


def site_root() -> str:
    """The origin for the request being served; SITE_ROOT outside a request (a task, a
    management command) or where SITE_ROOT governs."""
    return _request_origin.get() or settings.SITE_ROOT


def absolute(path: str) -> str:
    return site_root() + path


class SiteOriginMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if settings.DEBUG and not settings.SITE_ROOT_CONFIGURED:
            origin = f"{request.scheme}://{request.get_host()}"
        else:
            origin = settings.SITE_ROOT
        # Every absolute URI built from the request (DRF's links and cursors, the API root,
        # allauth's email links) starts with the same origin as the pages' own links.
        # Django caches scheme://host under this name for build_absolute_uri.
        request._current_scheme_host = origin
        token = _request_origin.set(origin)
        try:
            return self.get_response(request)
        finally:
            _request_origin.reset(token)

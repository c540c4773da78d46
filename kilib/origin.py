"""The one origin of every absolute link: citations, feeds, canonical links, API urls and
cursors, emails.

In production that is SITE_ROOT, whatever Host header a request carries (ALLOWED_HOSTS may
admit several names, and a page or an API answer built from the header would hand a
visitor's links to whoever chose it). Under DEBUG with SITE_ROOT unset (the demo, a laptop)
it is the origin the request came to, so links work wherever the site is served.

Outside a request (a management command, a worker) there is no served origin. Work a request
hands on (a notice task) carries the request's origin with it (`links_origin`); a command
takes SITE_ROOT or its own `--site-root`, and says which it uses when SITE_ROOT is unset
(`command_origin`), since the default then is only a guess at where the site is served.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse

_request_origin: ContextVar[str] = ContextVar("request_origin", default="")


def site_root() -> str:
    """The origin for the request being served; SITE_ROOT outside a request (a task, a
    management command) or where SITE_ROOT governs."""
    return _request_origin.get() or settings.SITE_ROOT


@contextmanager
def links_origin(origin: str) -> Iterator[str]:
    """Links built inside the block start with `origin` (none given: as outside a request)."""
    token = _request_origin.set(origin.rstrip("/")) if origin else None
    try:
        yield site_root()
    finally:
        if token is not None:
            _request_origin.reset(token)


def origin_checked(origin: str) -> str:
    """scheme://host[:port] with nothing after it, or ValueError saying what is wrong."""
    parts = urlsplit(origin.strip().rstrip("/"))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{origin!r} is not an origin like https://kernelindex.example.org")
    if parts.path or parts.query or parts.fragment:
        raise ValueError(f"{origin!r} has more than an origin (scheme, host and port only)")
    return f"{parts.scheme}://{parts.netloc}"


def command_origin(given: str = "") -> tuple[str, str]:
    """(origin, where it came from) for the links a command builds (watch emails after an
    ingest): `given` (a --site-root), else SITE_ROOT when it is set; else the default
    SITE_ROOT, and the reason says it is a default, for the command to print."""
    if given:
        return origin_checked(given), "from --site-root"
    if settings.SITE_ROOT_CONFIGURED:
        return settings.SITE_ROOT, "from SITE_ROOT"
    return settings.SITE_ROOT, (
        "SITE_ROOT is unset, so this is its default; set SITE_ROOT or pass --site-root "
        "to link to where the site is served"
    )


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

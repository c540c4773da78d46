"""A public page's ETag and conditional GET, and the page cache of anonymous GETs, both keyed by
the versions the page reads (runs/read/freshness.py).

What pays for the page cache: bench/layers.py at 1,001,692 runs (02220a5c, 2026-12-06, in
process; docs/performance.md, "What each read-side layer buys"): a page answered from it in
1.3-2.3 ms against 2.2-14.7 ms rendered from kept values (the run page 1.28 against 2.96 ms,
browse with two filters 2.06 against 14.74). The ETag and `no-cache` need no figure: they are
what lets browsers and proxies keep a page and never show it stale.
"""

from __future__ import annotations

import hashlib
from functools import wraps

from django.conf import settings
from django.http import HttpResponse
from django.utils import timezone
from django.utils.cache import get_conditional_response, patch_cache_control, patch_vary_headers
from django.utils.http import http_date
from django.utils.text import compress_string

from kilib.origin import site_root
from runs.read import freshness, store


def public_page(view=None, *, reads=None):
    """For a read-only view: `reads(**url kwargs)` names the scopes it reads (the run data
    without it). Signed-in readers are never served from or stored into the page cache, nor
    answered 304: their pages show their own drafts, forms and watches."""
    if view is None:
        return lambda view: public_page(view, reads=reads)

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.method not in ("GET", "HEAD"):
            return view(request, *args, **kwargs)
        anonymous, stateless = _reader(request)
        use_cache = stateless and settings.PAGE_CACHE_SECONDS > 0
        # Stored compressed for clients that take gzip, so a hit is not compressed again.
        gzipped = use_cache and "gzip" in request.headers.get("Accept-Encoding", "")
        versions = freshness.current(reads(**kwargs) if reads else freshness.EVERY_OTHER_PAGE)
        etag = _etag(request, versions, anonymous, gzipped)
        last = versions.last.timestamp() if versions.last else None
        if anonymous:
            not_modified = get_conditional_response(
                request, etag=etag, last_modified=int(last) if last else None
            )
            if not_modified is not None:
                return _revalidate(not_modified, anonymous)
        key = f"page:{etag[1:-1]}" if use_cache else None
        if key and (hit := store.get(key)) is not None:
            content_type, body, stored_headers = hit
            response = HttpResponse(body, content_type=content_type)
            for name, value in stored_headers:
                response.headers[name] = value
            response.headers["X-Page-Cache"] = "hit"
            return response
        with freshness.request_versions(versions):
            response = view(request, *args, **kwargs)
        return _finish(response, etag, last, anonymous, gzipped, key)

    return wrapper


def _reader(request) -> tuple[bool, bool]:
    """(anonymous, anonymous with no state of its own: may share the page cache). Without a
    session cookie or credentials the reader is anonymous: no need to load the session (and
    add Vary: Cookie) to learn that. A session or messages cookie may put a one-off notice on
    the page, so only a reader with neither shares the cache."""
    signed = settings.SESSION_COOKIE_NAME in request.COOKIES or "Authorization" in request.headers
    anonymous = not signed or not request.user.is_authenticated
    return anonymous, anonymous and not signed and "messages" not in request.COOKIES


def _etag(request, versions, anonymous: bool, gzipped: bool) -> str:
    raw = "|".join(
        [
            # The origin the absolute links are built from (kilib/origin.py), and the Host
            # header, which a view or a library may still read.
            site_root(),
            request.get_host(),
            request.get_full_path(),
            versions.key,
            timezone.now().date().isoformat(),  # citations show the access date
            "anon" if anonymous else f"user:{request.user.pk}",
            request.headers.get("Accept", ""),  # the API negotiates JSON or HTML on one URL
            "gzip" if gzipped else "identity",
        ]
    )
    return '"' + hashlib.sha256(raw.encode()).hexdigest()[:32] + '"'


def _finish(response, etag: str, last, anonymous: bool, gzipped: bool, key: str | None):
    """The view's answer with its validators and cache headers, stored under `key` if any."""
    if response.status_code != 200 or getattr(response, "streaming", False):
        return response
    if hasattr(response, "render") and not response.is_rendered:
        response.render()  # DRF and TemplateResponse render lazily
    if gzipped and not response.has_header("Content-Encoding"):
        response.content = compress_string(response.content)
        response["Content-Encoding"] = "gzip"
        patch_vary_headers(response, ["Accept-Encoding"])
    if anonymous:
        response["ETag"] = etag
        if last:
            response["Last-Modified"] = http_date(last)
    _revalidate(response, anonymous)
    if key:
        skip = ("content-type", "content-length", "x-page-cache")
        kept = [(name, value) for name, value in response.items() if name.lower() not in skip]
        store.put(
            key, (response["Content-Type"], response.content, kept), settings.PAGE_CACHE_SECONDS
        )
        response["X-Page-Cache"] = "miss"
    return response


def _revalidate(response, anonymous: bool):
    # Browsers and proxies may keep a page but must ask before each use (no-cache): the ETag
    # answers, so a copy is never shown once what the page reads has moved.
    patch_cache_control(response, no_cache=True, **{"public" if anonymous else "private": True})
    patch_vary_headers(response, ["Cookie", "Accept"])
    return response

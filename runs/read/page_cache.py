"""ETag, conditional GET and the shared page cache of anonymous GETs, keyed by the versions a
page reads (runs/read/freshness.py says which, and when a page goes stale).

What the page cache buys (bench/layers.py at 1,001,692 runs, 02220a5c, 2026-12-06, in
process): an anonymous page answered from it in 1.3-2.3 ms against 2.2-14.7 ms rendered from
kept values (the run page 1.28 against 2.96 ms, browse with two filters 2.06 against 14.74).
"""

from __future__ import annotations

import hashlib
from functools import wraps

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.cache import get_conditional_response, patch_cache_control, patch_vary_headers
from django.utils.http import http_date
from django.utils.text import compress_string

from kilib.origin import site_root
from runs.read import freshness, store


def public_page(view=None, *, reads=None):
    """For a read-only page: an ETag and Last-Modified from the versions it reads (a 304 when
    none has moved), and for anonymous GETs the shared page cache under those versions.

    `reads(**url kwargs)` names the scopes the page reads (freshness.run_page); without it,
    the run data only. Logged-in readers are never served from or stored into the shared
    cache, nor answered 304: their pages may carry their own drafts, forms and watches. The access date in citations is
    part of the key, so a page never shows yesterday's date.
    """
    if view is None:
        return lambda view: public_page(view, reads=reads)

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.method not in ("GET", "HEAD"):
            return view(request, *args, **kwargs)
        scopes = reads(**kwargs) if reads else freshness.EVERY_OTHER_PAGE
        anonymous, stateless = _reader(request)
        use_cache = stateless and getattr(settings, "PAGE_CACHE_SECONDS", 300) > 0
        # Cached pages are stored compressed for clients that take gzip, so a hit is not
        # compressed again on every request; each encoding is its own entry and ETag.
        gzipped = use_cache and "gzip" in request.headers.get("Accept-Encoding", "")
        versions = freshness.current(scopes)
        etag = '"' + _key(request, versions, anonymous, gzipped) + '"'
        last_ts = int(versions.last.timestamp()) if versions.last else None
        # A signed-in reader's page also shows their own rows that no version covers (their
        # watches): it is rendered for every request, never answered 304 from the versions.
        if anonymous:
            not_modified = get_conditional_response(request, etag=etag, last_modified=last_ts)
            if not_modified is not None:
                _headers(not_modified, anonymous)
                return not_modified
        key = f"page:{etag.strip(chr(34))}"
        if use_cache:
            hit = store.get(key)
            if hit is not None:
                return _from_entry(hit)
        with freshness.request_versions(versions):
            response = view(request, *args, **kwargs)
        if response.status_code != 200 or getattr(response, "streaming", False):
            return response
        if hasattr(response, "render") and not response.is_rendered:
            response.render()  # DRF and TemplateResponse render lazily
        if gzipped and not response.has_header("Content-Encoding"):
            response.content = compress_string(response.content)
            response["Content-Encoding"] = "gzip"
            patch_vary_headers(response, ["Accept-Encoding"])
        _finish(response, etag, versions.last, anonymous)
        if use_cache:
            _store(key, response)
        return response

    return wrapper


def _reader(request: HttpRequest) -> tuple[bool, bool]:
    """(anonymous, anonymous with no state of its own: may share the page cache)."""
    # Without a session cookie or credentials the reader is anonymous: no need to load the
    # session (and to add Vary: Cookie from it) just to learn that.
    anonymous = (
        settings.SESSION_COOKIE_NAME not in request.COOKIES
        and "Authorization" not in request.headers
    ) or not request.user.is_authenticated
    # Only a request that carries no state of its own shares the cache: a session or a
    # messages cookie may put a one-off notice ("signed out", "email confirmed") into the
    # page, which must not be stored for every other reader.
    stateless = not (
        settings.SESSION_COOKIE_NAME in request.COOKIES
        or "messages" in request.COOKIES
        or "Authorization" in request.headers
    )
    return anonymous, anonymous and stateless


def _key(request: HttpRequest, versions, anonymous: bool, gzipped: bool) -> str:
    raw = "|".join(
        [
            # The origin the page's absolute links are built from (SITE_ROOT, or under DEBUG
            # without it the address the request came to, scheme included), and the Host
            # header, which a view or a library may still read (allauth, DRF's browsable API).
            site_root(),
            request.get_host(),
            request.get_full_path(),
            versions.key,
            timezone.now().date().isoformat(),
            "anon" if anonymous else f"user:{request.user.pk}",
            # The API negotiates JSON or the browsable HTML on the same URL.
            request.headers.get("Accept", ""),
            "gzip" if gzipped else "identity",
        ]
    )
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def _from_entry(hit) -> HttpResponse:
    # The headers were worked out when the page was stored; set them as they were.
    content_type, body, headers = hit
    response = HttpResponse(body, content_type=content_type)
    for name, value in headers:
        response.headers[name] = value
    response.headers["X-Page-Cache"] = "hit"
    return response


def _store(key: str, response: HttpResponse) -> None:
    headers = tuple(
        (name, value)
        for name, value in response.items()
        if name.lower() not in ("content-type", "content-length", "x-page-cache")
    )
    entry = (response["Content-Type"], response.content, headers)
    store.put(key, entry, settings.PAGE_CACHE_SECONDS)
    response["X-Page-Cache"] = "miss"


def _headers(response: HttpResponse, anonymous: bool) -> None:
    # Browsers and proxies may keep a page but must ask before each use (no-cache): the ETag
    # answers, so a copy is never shown once what the page reads has moved.
    if anonymous:
        patch_cache_control(response, public=True, no_cache=True)
    else:
        patch_cache_control(response, private=True, no_cache=True)
    patch_vary_headers(response, ["Cookie", "Accept"])


def _finish(response: HttpResponse, etag: str, last, anonymous: bool) -> HttpResponse:
    if anonymous:
        response["ETag"] = etag
        if last:
            response["Last-Modified"] = http_date(last.timestamp())
    _headers(response, anonymous)
    return response

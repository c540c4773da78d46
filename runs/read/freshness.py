"""A cheap fingerprint of the public data, for ETags, Last-Modified and the page cache.

The fingerprint is the DataVersion row, which database triggers on every public table bump in
the same transaction as any write (save, update(), bulk_create, COPY, raw SQL): no write path
can forget it, and the new version becomes visible exactly when the write commits. A counter in
the cache (`data_changed()`, also called on every model save) is folded in as well, for writes
outside the database. Cached pages are keyed by the fingerprint, so a change makes every old
entry unreachable instead of having to find and delete it.

The fingerprint is remembered in the process for FINGERPRINT_TTL seconds (a second or two), so
a burst of requests costs one query; a change shows up at most that long after it commits.
"""

from __future__ import annotations

import hashlib
import logging
import time
from datetime import datetime
from functools import wraps

from django.apps import apps
from django.conf import settings
from django.core.cache import cache, caches
from django.db import connections, transaction
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.cache import get_conditional_response, patch_cache_control, patch_vary_headers
from django.utils.http import http_date
from django.utils.text import compress_string

from runs.models import DataVersion

logger = logging.getLogger(__name__)

VERSION_KEY = "runs:data-version"
_memo: dict = {"at": -1e9, "value": None}


def data_changed() -> None:
    """Call after a write that changes public pages (saves of the apps' models do it for you).

    Bumped now and again after commit: a request that read the old rows while the write was
    still uncommitted may have cached them under the first bump; the second retires that entry.
    """
    _bump()
    transaction.on_commit(_bump)


def _bump() -> None:
    _memo["at"] = -1e9
    try:
        try:
            cache.incr(VERSION_KEY)
        except ValueError:
            cache.set(VERSION_KEY, 1, timeout=None)
    except Exception:  # noqa: BLE001 - a cache outage must not fail the write that called us
        # Pages cached before the outage stay until PAGE_CACHE_SECONDS runs out.
        logger.warning("could not bump the page-cache data version", exc_info=True)


TRIGGER = "kernelindex_data_changed"


# Each app declares on its AppConfig whether its rows appear on public pages
# (`public_data = True`) and which of its models no public page reads or that change on every
# request (`private_models`, model names): runs names no other app (imports run one way).
def public_data_apps() -> frozenset[str]:
    """Labels of the apps whose rows appear on public pages."""
    return frozenset(c.label for c in apps.get_app_configs() if getattr(c, "public_data", False))


def private_models() -> frozenset[str]:
    """The "app.model" labels of the public apps' models that must not move the data version."""
    return frozenset(
        f"{config.label}.{name}"
        for config in apps.get_app_configs()
        if getattr(config, "public_data", False)
        for name in getattr(config, "private_models", ())
    )


def public_tables() -> list[str]:
    """Every table of the public apps (many-to-many tables too), less the private ones."""
    tables = set()
    private = private_models()
    for label in public_data_apps():
        for model in apps.get_app_config(label).get_models(include_auto_created=True):
            meta = model._meta
            if meta.managed and not meta.proxy and meta.label_lower not in private:
                tables.add(meta.db_table)
    return sorted(tables)


def triggers_install(using: str = "default", **kwargs) -> None:
    """(Re)create the triggers that bump DataVersion on any write to a public table. Run after
    every migrate (post_migrate), so a table added by any app's migration is covered."""
    connection = connections[using]
    version = connection.ops.quote_name(DataVersion._meta.db_table)
    existing = set(connection.introspection.table_names())
    if DataVersion._meta.db_table not in existing:
        return
    now = "now()" if connection.vendor == "postgresql" else "strftime('%Y-%m-%d %H:%M:%f','now')"
    # Insert-or-ignore, then update: the row may have been truncated away (test flushes).
    bump = (
        f"INSERT INTO {version} (id, value, changed_at) VALUES (1, 0, {now}) "
        f"ON CONFLICT (id) DO NOTHING; "
        f"UPDATE {version} SET value = value + 1, changed_at = {now} WHERE id = 1;"
    )
    tables = [t for t in public_tables() if t in existing]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"CREATE OR REPLACE FUNCTION {TRIGGER}() RETURNS trigger LANGUAGE plpgsql "
                f"AS $$ BEGIN {bump} RETURN NULL; END $$"
            )
            for table in tables:
                quoted = connection.ops.quote_name(table)
                cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER} ON {quoted}")
                # Per statement: a COPY of 2,000 runs bumps once, not 2,000 times.
                cursor.execute(
                    f"CREATE TRIGGER {TRIGGER} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE "
                    f"ON {quoted} FOR EACH STATEMENT EXECUTE FUNCTION {TRIGGER}()"
                )
        elif connection.vendor == "sqlite":
            for table in tables:
                for op in ("INSERT", "UPDATE", "DELETE"):
                    name = connection.ops.quote_name(f"{TRIGGER}_{table}_{op.lower()}")
                    cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
                    cursor.execute(
                        f"CREATE TRIGGER {name} AFTER {op} ON {connection.ops.quote_name(table)} "
                        f"BEGIN {bump} END"
                    )


def on_saved(sender, **kwargs) -> None:
    if getattr(sender._meta.app_config, "public_data", False):
        data_changed()


def data_fingerprint() -> tuple[str, datetime | None]:
    """(fingerprint, time of the latest change known) of everything the public pages show."""
    ttl = getattr(settings, "FINGERPRINT_TTL", 2.0)
    now = time.monotonic()
    if _memo["value"] is not None and now - _memo["at"] < ttl:
        return _memo["value"]
    data, last = DataVersion.objects.filter(pk=1).values_list("value", "changed_at").first() or (
        0,
        None,
    )
    version = _cache_call(cache.get, VERSION_KEY, 0)
    # Without the version counter a change cannot retire cached pages: cache nothing meanwhile.
    # Nor while the cache serves from one process's memory (Redis down, kernelindex/cache.py).
    _memo["cache_ok"] = version is not None and not getattr(cache, "degraded", lambda: False)()
    value = (f"{data}.{last.timestamp() if last else 0:.6f}.{version}", last)
    _memo.update(at=now, value=value)
    return value


def _cache_call(method, *args):
    """The shared cache is an accelerator: when it is down, pages are rendered, not refused."""
    try:
        return method(*args)
    except Exception:  # noqa: BLE001
        logger.warning("page cache unavailable", exc_info=True)
        return None


def reset() -> None:
    """Start on a new fingerprint with nothing remembered: tests whose database rolled back
    while the cache kept its pages."""
    _bump()
    _memo.update(at=-1e9, value=None)
    _local.clear()
    _per_change.clear()


_per_change: dict[str, tuple[str, object]] = {}


def once_per_data_change(name: str, compute):
    """compute(), remembered in this process until the data fingerprint moves.

    For small facts that pages would otherwise ask for on every request (which runs have any
    rerun jobs, which have any attestations): one query per data change instead of one per
    page. The fingerprint is read before computing, so a write that commits meanwhile moves it
    again and the value is recomputed: never older than the fingerprint it is stored under.
    """
    fingerprint, _ = data_fingerprint()
    hit = _per_change.get(name)
    if hit is None or hit[0] != fingerprint:
        hit = _per_change[name] = (fingerprint, compute())
    return hit[1]


def cached_per_data_change(key: str, compute, *, using: str = "default", keep=None):
    """compute(), kept in a cache under the data fingerprint: for per-object parts of a page (a
    run's history chart, a benchmark page's rendered tables) that stay the same until the data
    changes. `using="fragments"` keeps it in the process's memory (no round trip); `keep`
    decides which values are worth keeping (not error pages, whose keys a client can vary at
    will). A cache outage computes every time; it never serves a value under another
    fingerprint."""
    fingerprint, _ = data_fingerprint()
    full = f"part:{key}:{fingerprint}"
    store = caches[using]
    value = _cache_call(store.get, full)
    if value is None:
        value = compute()
        if keep is None or keep(value):
            _cache_call(store.set, full, value, 3600)
    return value


def kept_per_data_change(kind: str, ids, build) -> dict:
    """{id: part} for each id's `kind` part (a listing's table row, a run as the API lists it),
    kept in this process's memory until the data fingerprint moves.

    `build(missing ids)` makes the parts not kept, all in one go, so a page of fifty costs one
    lookup when warm and one query more when cold, however many of its rows were missing. A
    listing's query then needs only the ids and its sort key, not the rows' relations."""
    fingerprint, _ = data_fingerprint()
    store = caches["fragments"]
    keys = {pk: f"{kind}:{pk}:{fingerprint}" for pk in ids}
    found = store.get_many(list(keys.values()))
    parts = {pk: found[key] for pk, key in keys.items() if key in found}
    missing = [pk for pk in keys if pk not in parts]
    if missing:
        built = build(missing)
        store.set_many({keys[pk]: part for pk, part in built.items()}, 3600)
        parts.update(built)
    return parts


def public_page(view):
    """ETag, Last-Modified and Cache-Control for a read-only page, and a page cache for anonymous
    GETs keyed by the data fingerprint.

    Logged-in readers are never served from or stored into the shared cache: their pages may
    carry their own drafts or forms. The access date in citations is part of the key, so a page
    never shows yesterday's date.
    """

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.method not in ("GET", "HEAD"):
            return view(request, *args, **kwargs)
        fingerprint, last = data_fingerprint()
        # Without a session cookie or credentials the reader is anonymous: no need to load the
        # session (and to add Vary: Cookie from it) just to learn that.
        anonymous = (
            settings.SESSION_COOKIE_NAME not in request.COOKIES
            and "Authorization" not in request.headers
        ) or not request.user.is_authenticated
        seconds = getattr(settings, "PAGE_CACHE_SECONDS", 300)
        # Only a request that carries no state of its own shares the cache: a session or a
        # messages cookie may put a one-off notice ("signed out", "email confirmed") into the
        # page, which must not be stored for every other reader.
        stateless = not (
            settings.SESSION_COOKIE_NAME in request.COOKIES
            or "messages" in request.COOKIES
            or "Authorization" in request.headers
        )
        use_cache = anonymous and stateless and seconds > 0 and _memo.get("cache_ok", True)
        # Cached pages are stored compressed for clients that take gzip, so a hit is not
        # compressed again on every request; each encoding is its own entry and ETag.
        gzipped = use_cache and "gzip" in request.headers.get("Accept-Encoding", "")
        raw = "|".join(
            [
                # Pages are built from SITE_ROOT, but a view or a library may still read the
                # Host header (allauth, DRF's browsable API): the host is part of the key.
                request.get_host(),
                request.get_full_path(),
                fingerprint,
                timezone.now().date().isoformat(),
                "anon" if anonymous else f"user:{request.user.pk}",
                # The API negotiates JSON or the browsable HTML on the same URL.
                request.headers.get("Accept", ""),
                "gzip" if gzipped else "identity",
            ]
        )
        etag = '"' + hashlib.sha256(raw.encode()).hexdigest()[:32] + '"'
        last_ts = int(last.timestamp()) if last else None
        not_modified = get_conditional_response(request, etag=etag, last_modified=last_ts)
        if not_modified is not None:
            _headers(not_modified, anonymous)
            return not_modified
        key = f"page:{etag.strip(chr(34))}"
        if use_cache:
            hit = _local.get(key)
            if hit is None:
                hit = _cache_call(cache.get, key)
                if hit is not None:
                    _remember(key, hit)
            if hit is not None:
                # The headers were worked out when the page was stored; set them as they were.
                content_type, body, headers = hit
                response = HttpResponse(body, content_type=content_type)
                for name, value in headers:
                    response.headers[name] = value
                response.headers["X-Page-Cache"] = "hit"
                return response
        response = view(request, *args, **kwargs)
        if response.status_code != 200 or getattr(response, "streaming", False):
            return response
        if hasattr(response, "render") and not response.is_rendered:
            response.render()  # DRF and TemplateResponse render lazily
        if use_cache and gzipped and not response.has_header("Content-Encoding"):
            response.content = compress_string(response.content)
            response["Content-Encoding"] = "gzip"
            patch_vary_headers(response, ["Accept-Encoding"])
        _finish(response, etag, last, anonymous)
        if use_cache:
            headers = tuple(
                (name, value)
                for name, value in response.items()
                if name.lower() not in ("content-type", "content-length", "x-page-cache")
            )
            entry = (response["Content-Type"], response.content, headers)
            _cache_call(cache.set, key, entry, seconds)
            _remember(key, entry)
            response["X-Page-Cache"] = "miss"
        return response

    return wrapper


# A small per-process copy of the shared page cache: a hit costs a dict lookup instead of a
# round trip. Keys carry the data fingerprint, so a change makes old entries unreachable here
# too; the size bound evicts them, oldest first.
_LOCAL_ENTRIES = 256
_LOCAL_MAX_BYTES = 256 * 1024
_local: dict[str, tuple[str, bytes, tuple]] = {}


def _remember(key: str, entry: tuple[str, bytes, tuple]) -> None:
    if len(entry[1]) > _LOCAL_MAX_BYTES:
        return
    if len(_local) >= _LOCAL_ENTRIES:
        _local.pop(next(iter(_local)))
    _local[key] = entry


def _headers(response: HttpResponse, anonymous: bool) -> None:
    if anonymous:
        patch_cache_control(response, public=True, max_age=60)
    else:
        patch_cache_control(response, private=True, no_cache=True)
    patch_vary_headers(response, ["Cookie", "Accept"])


def _finish(response: HttpResponse, etag: str, last, anonymous: bool) -> HttpResponse:
    response["ETag"] = etag
    if last:
        response["Last-Modified"] = http_date(last.timestamp())
    _headers(response, anonymous)
    return response

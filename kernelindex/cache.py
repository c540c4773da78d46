"""The shared cache, and what happens when Redis is down.

Redis holds the page cache, the values kept for pages and rate-limit counters (allauth's login
and reset limits, the community write limits). An outage must never take a login or a write down, so
every operation that cannot reach Redis is logged and served by a per-process memory store
instead: rate limits keep counting per web process (stricter than failing open: an attacker
gets at most the limit per process, not unlimited tries), and pages are kept in process memory
meanwhile, under the same version keys (runs/read/freshness.py: the versions live in the
database, so a page kept in either store is never served once what it reads has moved), and
`degraded()` says so to whoever asks. When Redis answers again, the
next operation uses it; counters started during the outage stay behind in memory.
"""

from __future__ import annotations

import logging
import time

from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

_OUTAGE = (RedisConnectionError, RedisTimeoutError, ConnectionError, TimeoutError, OSError)
# After a failure, go straight to memory for this long instead of waiting on a dead socket for
# every call.
RETRY_AFTER = 2.0


class ReusedClient(RedisCacheClient):
    """Django's client, with one redis.Redis per connection pool instead of one per operation:
    building one copies redis-py's table of response callbacks (about 0.6 ms a call, most of a
    cache lookup's time in process). A redis.Redis is safe to share between threads; it takes
    a connection from its pool for each command."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients = {}

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)  # kept in self._pools: its id stays its own
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


class FallbackRedisCache(RedisCache):
    def __init__(self, server, params):
        options = dict(params.get("OPTIONS") or {})
        # A dead Redis answers fast: one second to connect or read, not the OS default.
        options.setdefault("socket_connect_timeout", 1)
        options.setdefault("socket_timeout", 1)
        super().__init__(server, {**params, "OPTIONS": options})
        self._class = ReusedClient
        self._fallback = LocMemCache(f"fallback-{id(self)}", {"TIMEOUT": params.get("TIMEOUT")})
        self._down_until = 0.0

    def degraded(self) -> bool:
        return time.monotonic() < self._down_until

    def _call(self, name: str, *args, **kwargs):
        if not self.degraded():
            try:
                return getattr(super(), name)(*args, **kwargs)
            except _OUTAGE:
                logger.warning("cache unavailable: %s served from process memory", name)
                self._down_until = time.monotonic() + RETRY_AFTER
        return getattr(self._fallback, name)(*args, **kwargs)

    def add(self, *args, **kwargs):
        return self._call("add", *args, **kwargs)

    def get(self, *args, **kwargs):
        return self._call("get", *args, **kwargs)

    def set(self, *args, **kwargs):
        return self._call("set", *args, **kwargs)

    def touch(self, *args, **kwargs):
        return self._call("touch", *args, **kwargs)

    def delete(self, *args, **kwargs):
        return self._call("delete", *args, **kwargs)

    def get_many(self, *args, **kwargs):
        return self._call("get_many", *args, **kwargs)

    def has_key(self, *args, **kwargs):
        return self._call("has_key", *args, **kwargs)

    def incr(self, *args, **kwargs):
        return self._call("incr", *args, **kwargs)

    def set_many(self, *args, **kwargs):
        return self._call("set_many", *args, **kwargs)

    def delete_many(self, *args, **kwargs):
        return self._call("delete_many", *args, **kwargs)

    def clear(self):
        self._fallback.clear()
        return self._call("clear")


def degraded() -> bool:
    """True while the default cache is serving from process memory."""
    from django.core.cache import cache

    return bool(getattr(cache, "degraded", lambda: False)())

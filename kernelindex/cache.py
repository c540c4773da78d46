"""The shared cache, and what happens when Redis is down.

Redis holds the page cache, the values kept for pages and the rate-limit counters (allauth's
login and reset limits, the community write limits). An outage must never take a page, a login
or a write down (tests/faults/test_redis_outage.py), so every operation that cannot reach Redis
is logged and served by a memory store in the process instead: rate limits keep counting per
process (stricter than failing open), and pages and kept values are kept there under the same
version keys, which the database moves, so neither store serves one once what it read has moved.
When Redis answers again, the next operation uses it. No speed figure pays for this layer: it
is what keeps an outage from becoming errors.
"""

from __future__ import annotations

import logging
import time

from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

# Any failure of Redis, not only an unreachable one: a full Redis refuses writes with an error.
_OUTAGE = (RedisError, OSError)
# After a failure, go straight to memory for this long instead of waiting on a dead socket for
# every call.
RETRY_AFTER = 2.0


class FallbackRedisCache(RedisCache):
    def __init__(self, server, params):
        # A dead Redis answers fast: one second to connect or read, not the OS default.
        options = {
            "socket_connect_timeout": 1,
            "socket_timeout": 1,
            **(params.get("OPTIONS") or {}),
        }
        super().__init__(server, {**params, "OPTIONS": options})
        self._fallback = LocMemCache(f"fallback-{id(self)}", {"TIMEOUT": params.get("TIMEOUT")})
        self._down_until = 0.0

    def degraded(self) -> bool:
        """True while this cache serves from process memory."""
        return time.monotonic() < self._down_until

    def _call(self, name: str, *args, **kwargs):
        if not self.degraded():
            try:
                return getattr(RedisCache, name)(self, *args, **kwargs)
            except _OUTAGE as error:
                logger.warning("cache unavailable: %s served from process memory (%s)", name, error)
                self._down_until = time.monotonic() + RETRY_AFTER
        return getattr(self._fallback, name)(*args, **kwargs)

    def clear(self):
        self._fallback.clear()
        return self._call("clear")


def _through_fallback(name: str):
    def method(self, *args, **kwargs):
        return self._call(name, *args, **kwargs)

    method.__name__ = name
    return method


# Every operation of Django's cache API that reaches Redis goes through _call (clear() above
# empties the fallback too).
for _name in (
    "add", "get", "set", "touch", "delete", "get_many", "has_key", "incr", "set_many",
    "delete_many",
):  # fmt: skip
    setattr(FallbackRedisCache, _name, _through_fallback(_name))

"""The shared cache's backend against a real Redis: each operation reaches Redis while it
answers (tests/faults/test_redis_outage.py stops it)."""

from __future__ import annotations

import pytest
import redis

from kernelindex.cache import FallbackRedisCache

pytestmark = pytest.mark.services


def test_operations_reach_redis_while_it_answers(services):
    cache = FallbackRedisCache(services, {"KEY_PREFIX": "test-cache-client"})
    cache.set("k", {"a": 1}, 30)
    assert redis.Redis.from_url(services).exists(cache.make_key("k"))
    assert cache.get("k") == {"a": 1}
    assert cache.get_many(["k", "missing"]) == {"k": {"a": 1}}
    cache.delete("k")
    assert cache.get("k") is None and not cache.degraded()

"""The shared cache's Redis client: one per connection pool, reused by every operation."""

from __future__ import annotations

import pytest

from kernelindex.cache import FallbackRedisCache

pytestmark = pytest.mark.services


def test_every_operation_shares_one_client(services):
    cache = FallbackRedisCache(services, {"KEY_PREFIX": "test-cache-client"})
    first = cache._cache.get_client(write=True)
    cache.set("k", {"a": 1}, 30)
    assert cache.get("k") == {"a": 1}
    assert cache.get_many(["k", "missing"]) == {"k": {"a": 1}}
    assert cache._cache.get_client() is first  # one server: reads and writes share its pool
    assert cache._cache.get_client(write=True) is first
    cache.delete("k")
    assert cache.get("k") is None


def test_each_server_has_its_own_client(services):
    # Two locations: writes go to the first, reads to the second (Django's rule); each pool
    # gets one client, never another's.
    cache = FallbackRedisCache([services, services], {"KEY_PREFIX": "test-cache-client"})
    writer = cache._cache.get_client(write=True)
    reader = cache._cache.get_client()
    assert writer is not reader
    assert writer.connection_pool is cache._cache._get_connection_pool(True)
    assert cache._cache.get_client() is reader

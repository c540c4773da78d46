from __future__ import annotations

import pytest
from django.core.cache import cache

from tests.factories_attestations import make_staff, verify_email


@pytest.fixture(autouse=True)
def _fresh_cache(settings, request):
    """Rate-limit counters live in the cache: each test gets an empty one of its own. A private
    local-memory cache rather than clearing Redis, which other suites may be using;
    test_ratelimit_redis.py covers the Redis-backed counters."""
    settings.CACHES = {
        **settings.CACHES,
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": f"attestations-{request.node.nodeid}",
        },
    }
    yield
    cache.clear()


@pytest.fixture
def owner(alice):
    """alice, verified: the author of the items in object-route tests."""
    verify_email(alice)
    return alice


@pytest.fixture
def other(bob):
    """bob, verified: another contributor."""
    verify_email(bob)
    return bob


@pytest.fixture
def stranger(charlie):
    """charlie: logged in, but never verified an address."""
    return charlie


@pytest.fixture
def staff(db):
    return make_staff()

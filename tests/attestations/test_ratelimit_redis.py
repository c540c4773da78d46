"""The write limits against the real Redis: counters are shared by every process that uses
the same cache, so a limit holds across web workers."""

from __future__ import annotations

import uuid

import pytest
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django.test import RequestFactory

from attestations import ratelimit

pytestmark = pytest.mark.services


@pytest.fixture
def redis_cache(services, settings):
    settings.CACHES = {
        **settings.CACHES,
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": services,
            # A prefix of its own, so the test touches only its keys.
            "KEY_PREFIX": f"test-{uuid.uuid4().hex}",
        },
    }
    assert isinstance(caches["default"], RedisCache)
    return settings.CACHES["default"]


def test_limit_is_shared_through_redis(redis_cache, owner, settings):
    settings.COMMUNITY_RATE_LIMITS = {**settings.COMMUNITY_RATE_LIMITS, "attestation": (2, 60)}
    request = RequestFactory().post("/", REMOTE_ADDR="10.1.2.3")
    request.user = owner
    assert ratelimit.consume(request, "attestation")
    assert ratelimit.consume(request, "attestation")
    assert not ratelimit.consume(request, "attestation")
    # A second, independent client (another web process) sees the same count.
    other_process = RedisCache(redis_cache["LOCATION"], {"KEY_PREFIX": redis_cache["KEY_PREFIX"]})
    assert other_process.get(f"community-rl:attestation:user:{owner.pk}") == 3
    other_process.delete_many(
        [
            "community-rl:attestation:ip-accounts:10.1.2.3",
            f"community-rl:attestation:user:{owner.pk}",
        ]
    )

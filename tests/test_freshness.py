"""The data fingerprint and page cache: a cache outage degrades to rendering, never to errors."""

from __future__ import annotations

import pytest
from django.core.cache.backends.base import BaseCache
from django.test import override_settings

from tests.factories import RunFactory


class BrokenCache(BaseCache):
    """A cache whose server is down."""

    def __init__(self, location, params):
        super().__init__(params)

    def _fail(self, *args, **kwargs):
        raise ConnectionError("cache server is down")

    get = set = add = delete = incr = clear = _fail


@pytest.mark.django_db
def test_pages_and_writes_survive_a_cache_outage(client, settings):
    run = RunFactory()
    settings.PAGE_CACHE_SECONDS = 300
    broken = {**settings.CACHES, "default": {"BACKEND": "tests.test_freshness.BrokenCache"}}
    with override_settings(CACHES=broken):
        response = client.get(f"/runs/{run.public_id}/")
        assert response.status_code == 200 and response["ETag"]
        run.evidence = "checked"
        run.save()  # the save's fingerprint bump fails quietly, the write stands
        assert b"evidence-checked" in client.get(f"/runs/{run.public_id}/").content

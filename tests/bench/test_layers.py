"""bench/layers.py: each mode turns off what it names, for every page that uses it, and puts
everything back after."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import layers  # noqa: E402


@pytest.mark.django_db
def test_nothing_kept_computes_every_part_and_is_undone(settings):
    from runs.pages import views
    from runs.read import catalogue, freshness

    cached, cached_many = freshness.cached, freshness.cached_many
    calls = []
    with layers.mode("nothing kept"):
        assert settings.PAGE_CACHE_SECONDS == 0
        # Every module that imported cached by name computes each time it asks.
        for _ in range(2):
            views.cached("x", [freshness.DATA], lambda: calls.append(1))
        assert len(calls) == 2
        assert catalogue.cached_many("k", [1, 2], [freshness.DATA], lambda ids: {i: i for i in ids})
    assert (views.cached, catalogue.cached_many) == (cached, cached_many)
    assert (freshness.cached, freshness.cached_many) == (cached, cached_many)
    assert settings.PAGE_CACHE_SECONDS > 0


def test_no_process_copy_sends_every_get_to_the_shared_cache():
    from runs.read import store

    largest = store.LARGEST
    with layers.mode("no process copy"):
        store.put("layers-test", "value", 60)
        assert "layers-test" not in store.copy
    assert store.LARGEST == largest
    store.put("layers-test", "value", 60)
    assert "layers-test" in store.copy

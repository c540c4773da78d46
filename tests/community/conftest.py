from __future__ import annotations

import pytest
from django.core.cache import cache

from tests.factories import RunFactory
from tests.factories_community import make_staff, verify_email


@pytest.fixture(autouse=True)
def _fresh_cache():
    # Rate-limit counters live in the cache; each test starts with none.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def run(db):
    return RunFactory(median=385_536, p20=384_685, p80=386_240)


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

"""Guessed bearer tokens are counted per address: past API_TOKEN_FAILURES failures the address
is answered 429 before any token it sends is looked up, even a right one; other addresses and
their tokens are untouched."""

from __future__ import annotations

import uuid

import pytest

from attestations import services
from tests.factories_attestations import verify_email

WRONG = "Bearer ki_" + "x" * 43


@pytest.fixture(autouse=True)
def _limit(settings):
    settings.API_TOKEN_FAILURES = (20, 600)


def _address() -> str:
    """An address no earlier run has counted against (the counts live in the shared cache,
    which is not flushed: in CI it is the broker's Redis)."""
    return f"2001:db8::{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}"


def _get(client, auth: str, address: str):
    return client.get("/api/v1/reports/", HTTP_AUTHORIZATION=auth, REMOTE_ADDR=address)


def test_sixty_wrong_tokens_are_throttled_after_twenty(client, alice):
    verify_email(alice)
    _, raw = services.token_create(user=alice, name="mine")
    guesser, other, malformed = _address(), _address(), _address()
    statuses = [_get(client, WRONG, guesser).status_code for _ in range(60)]
    assert statuses == [401] * 20 + [429] * 40
    blocked = _get(client, f"Bearer {raw}", guesser)
    assert blocked.status_code == 429 and "failed token authentications" in blocked.json()["detail"]
    assert blocked["Retry-After"] == "600"
    # Malformed headers count too.
    assert _get(client, "Bearer a b", malformed).status_code == 401
    # Another address is not affected, nor is the token's owner elsewhere.
    assert _get(client, WRONG, other).status_code == 401
    assert _get(client, f"Bearer {raw}", other).status_code == 200


def test_right_tokens_are_not_counted(client, alice):
    verify_email(alice)
    _, raw = services.token_create(user=alice, name="mine")
    address = _address()
    for _ in range(30):
        assert _get(client, f"Bearer {raw}", address).status_code == 200
    assert _get(client, WRONG, address).status_code == 401

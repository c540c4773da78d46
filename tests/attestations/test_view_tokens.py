"""/me/tokens/: API tokens, stored hashed, shown once, revocable."""

from __future__ import annotations

import hashlib

import pytest
from django.test import Client

from attestations import services
from attestations.models import ApiToken
from tests.factories_attestations import login_staff


def test_needs_login(client, db):
    assert client.get("/me/tokens/").status_code == 302
    assert client.post("/me/tokens/", {"name": "x"}).status_code == 302
    assert not ApiToken.objects.exists()


def test_create_shows_token_once_and_stores_hash(client, owner):
    client.force_login(owner)
    response = client.post("/me/tokens/", {"name": "lab CI"})
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    raw = response.context["created"]["raw"]
    token = ApiToken.objects.get()
    assert raw in response.content.decode()
    assert token.digest == hashlib.sha256(raw.encode()).hexdigest()
    assert raw not in {token.digest, token.prefix, token.name}
    assert raw not in client.get("/me/tokens/").content.decode()
    assert services.token_authenticate(raw) == owner


@pytest.mark.parametrize("who, status", [("owner", 302), ("other", 404), ("stranger", 404)])
def test_revoke_matrix(client, request, owner, who, status):
    token, raw = services.token_create(user=owner, name="t")
    client.force_login(request.getfixturevalue(who))
    assert client.post(f"/me/tokens/{token.pk}/revoke/").status_code == status
    token.refresh_from_db()
    assert (token.revoked_at is not None) == (who == "owner")
    assert (services.token_authenticate(raw) is None) == (who == "owner")


def test_revoke_anonymous(client, owner):
    token, _ = services.token_create(user=owner, name="t")
    assert client.post(f"/me/tokens/{token.pk}/revoke/").status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is None


def test_list_shows_only_own_tokens(client, owner, other):
    services.token_create(user=other, name="bobs-token")
    client.force_login(owner)
    assert "bobs-token" not in client.get("/me/tokens/").content.decode()


def test_bad_name(client, owner):
    client.force_login(owner)
    response = client.post("/me/tokens/", {"name": "x" * 101})
    assert response.status_code == 200
    assert "at most 100 characters" in response.content.decode()
    assert not ApiToken.objects.exists()


def test_csrf_is_enforced(owner):
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(owner)
    assert csrf_client.post("/me/tokens/", {"name": "x"}).status_code == 403
    assert not ApiToken.objects.exists()


def test_rate_limit(client, owner, settings):
    settings.COMMUNITY_RATE_LIMITS = {**settings.COMMUNITY_RATE_LIMITS, "token": (2, 3600)}
    client.force_login(owner)
    codes = [client.post("/me/tokens/", {"name": f"t{i}"}).status_code for i in range(3)]
    assert codes == [200, 200, 429]
    assert ApiToken.objects.count() == 2


def test_only_owner_or_staff_revoke(owner, other, staff):
    token, raw = services.token_create(user=owner, name="t")
    with pytest.raises(services.NotAllowed):
        services.token_revoke(token=token, user=other)
    assert services.token_authenticate(raw) == owner
    services.token_revoke(token=token, user=staff)
    assert services.token_authenticate(raw) is None


def test_staff_revoke_in_admin(client, owner, staff):
    token, raw = services.token_create(user=owner, name="leaked")
    login_staff(client, staff)
    response = client.post(
        "/admin/attestations/apitoken/", {"action": "revoke", "_selected_action": [token.pk]}
    )
    assert response.status_code == 302
    assert services.token_authenticate(raw) is None

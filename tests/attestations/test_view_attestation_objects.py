"""Object routes of one attestation: detail, edit, withdraw, for the owner (alice), another
user (bob), a stranger (charlie) and anonymous."""

from __future__ import annotations

import pytest

from attestations.models import Attestation
from tests.factories_attestations import AttestationFactory


@pytest.fixture
def pending(run, owner):
    return AttestationFactory(run=run, author=owner, body="pending text")


@pytest.fixture
def approved(run, owner):
    return AttestationFactory(run=run, author=owner, state="approved", body="approved text")


def _login(client, who, request):
    if who != "anonymous":
        client.force_login(request.getfixturevalue(who))


@pytest.mark.parametrize(
    "who, pending_status", [("owner", 200), ("other", 404), ("stranger", 404), ("anonymous", 404)]
)
def test_detail(client, request, pending, approved, who, pending_status):
    _login(client, who, request)
    assert client.get(f"/attestations/{pending.pk}/").status_code == pending_status
    response = client.get(f"/attestations/{approved.pk}/")
    assert response.status_code == 200
    assert "approved text" in response.content.decode()


@pytest.mark.parametrize(
    "who, status", [("owner", 200), ("other", 404), ("stranger", 404), ("anonymous", 302)]
)
def test_edit_get(client, request, pending, who, status):
    _login(client, who, request)
    assert client.get(f"/attestations/{pending.pk}/edit/").status_code == status


@pytest.mark.parametrize(
    "who, status", [("owner", 302), ("other", 404), ("stranger", 404), ("anonymous", 302)]
)
def test_edit_post(client, request, pending, who, status):
    _login(client, who, request)
    data = {"median": "400", "input_unit": "us", "body": "changed"}
    response = client.post(f"/attestations/{pending.pk}/edit/", data)
    assert response.status_code == status
    pending.refresh_from_db()
    if who == "owner":
        assert (pending.body, pending.median, pending.state) == ("changed", 400_000, "pending")
    else:
        assert pending.body == "pending text"


def test_edit_form_shows_stored_values(client, pending, owner):
    client.force_login(owner)
    form = client.get(f"/attestations/{pending.pk}/edit/").context["form"]
    assert form.initial["input_unit"] == "us"
    assert form.initial["median"] * 1000 == pending.median


@pytest.mark.parametrize(
    "who, status", [("owner", 302), ("other", 404), ("stranger", 404), ("anonymous", 302)]
)
def test_withdraw(client, request, pending, who, status):
    _login(client, who, request)
    assert client.post(f"/attestations/{pending.pk}/withdraw/").status_code == status
    pending.refresh_from_db()
    assert pending.state == ("withdrawn" if who == "owner" else "pending")


def test_withdraw_needs_post(client, pending, owner):
    client.force_login(owner)
    assert client.get(f"/attestations/{pending.pk}/withdraw/").status_code == 405
    pending.refresh_from_db()
    assert pending.state == "pending"


def test_approved_item_cannot_be_edited_or_withdrawn(client, approved, owner):
    client.force_login(owner)
    response = client.post(f"/attestations/{approved.pk}/edit/", {"body": "x", "input_unit": "us"})
    assert response.status_code == 409
    assert "Only pending items" in response.content.decode()
    assert client.post(f"/attestations/{approved.pk}/withdraw/").status_code == 409
    approved.refresh_from_db()
    assert (approved.state, approved.body) == ("approved", "approved text")


def test_unknown_id_is_404(client, owner):
    client.force_login(owner)
    assert client.get("/attestations/999999/").status_code == 404
    assert client.get("/attestations/999999/edit/").status_code == 404


def test_withdrawn_item_no_longer_listed(client, run, pending, owner):
    client.force_login(owner)
    client.post(f"/attestations/{pending.pk}/withdraw/")
    assert not Attestation.objects.visible_to(owner).filter(pk=pending.pk).exists()


@pytest.mark.parametrize("who, status", [("owner", 200), ("other", 404), ("anonymous", 404)])
def test_rejected_item_shows_its_reason_to_the_author_only(
    client, request, run, owner, who, status
):
    item = AttestationFactory(
        run=run, author=owner, state="rejected", moderation_reason="No harness given."
    )
    _login(client, who, request)
    response = client.get(f"/attestations/{item.pk}/")
    assert response.status_code == status
    if status == 200:
        assert "No harness given." in response.content.decode()


def test_withdraw_is_rate_limited(client, run, owner, settings):
    settings.COMMUNITY_RATE_LIMITS = {**settings.COMMUNITY_RATE_LIMITS, "attestation": (1, 3600)}
    first, second = (
        AttestationFactory(run=run, author=owner),
        AttestationFactory(run=run, author=owner),
    )
    client.force_login(owner)
    assert client.post(f"/attestations/{first.pk}/withdraw/").status_code == 302
    assert client.post(f"/attestations/{second.pk}/withdraw/").status_code == 429
    second.refresh_from_db()
    assert second.state == "pending"

"""/runs/<id>/attest/: adding a reproduction or note."""

from __future__ import annotations

import pytest
from django.test import Client

from attestations.models import Attestation

FORM = {
    "kind": "reproduction",
    "median": "390.5",
    "p20": "389.9",
    "p80": "391.25",
    "input_unit": "us",
    "driver_version": "570.86",
    "cuda_version": "12.8",
    "torch_version": "2.7.1",
    "harness": "liger benchmark scripts",
    "commit_url": "https://github.com/linkedin/Liger-Kernel/commit/abc",
    "body": "Same workload on my **H100**.",
}


def _url(run) -> str:
    return f"/runs/{run.public_id}/attest/"


def test_anonymous_is_sent_to_login(client, run):
    response = client.get(_url(run))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    response = client.post(_url(run), FORM)
    assert response.status_code == 302
    assert not Attestation.objects.exists()


def test_form_renders_for_verified_user(client, run, owner):
    client.force_login(owner)
    response = client.get(_url(run))
    assert response.status_code == 200
    assert b"Add a reproduction or note" in response.content
    assert b'name="csrfmiddlewaretoken"' in response.content


def test_post_creates_pending_reproduction_in_ns(client, run, owner):
    client.force_login(owner)
    response = client.post(_url(run), FORM)
    assert response.status_code == 302
    assert response["Location"] == f"/runs/{run.public_id}/#replications"
    item = Attestation.objects.get()
    assert (item.state, item.kind, item.author) == ("pending", "reproduction", owner)
    assert (item.median, item.p20, item.p80, item.unit) == (390_500, 389_900, 391_250, "ns")
    page = client.get(response["Location"])
    assert "awaits moderation" in page.content.decode()


@pytest.mark.parametrize(
    "unit, value, stored", [("ms", "0.3855", 385_500), ("ns", "385536", 385_536)]
)
def test_units_are_converted(client, run, owner, unit, value, stored):
    client.force_login(owner)
    data = {**FORM, "median": value, "p20": "", "p80": "", "input_unit": unit}
    assert client.post(_url(run), data).status_code == 302
    assert Attestation.objects.get().median == stored


def test_memory_run_refuses_time_units(client, owner):
    from tests.factories import RunFactory

    memory_run = RunFactory(metric="memory", unit="B", median=1024**3)
    client.force_login(owner)
    response = client.post(_url(memory_run), {**FORM, "input_unit": "us"})
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    response = client.post(
        _url(memory_run), {**FORM, "median": "1.5", "p20": "", "p80": "", "input_unit": "GiB"}
    )
    assert response.status_code == 302
    assert Attestation.objects.get().median == 1024**3 * 3 // 2


def test_note(client, run, owner):
    client.force_login(owner)
    response = client.post(_url(run), {"kind": "note", "body": "Looks right.", "input_unit": "us"})
    assert response.status_code == 302
    note = Attestation.objects.get()
    assert (note.kind, note.median, note.body) == ("note", None, "Looks right.")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"median": ""}, "needs a measured median"),
        ({"median": "abc"}, "Enter a number"),
        ({"p20": "500"}, "p20 ≤ median ≤ p80"),
        ({"commit_url": "javascript:alert(1)"}, "Enter a valid URL"),
        ({"kind": "rumour"}, "Select a valid choice"),
        ({"body": "x" * 20_001}, "at most 20000 characters"),
        ({"driver_version": "9" * 65}, "at most 64 characters"),
    ],
)
def test_bad_input_is_a_form_error(client, run, owner, change, message):
    client.force_login(owner)
    response = client.post(_url(run), {**FORM, **change})
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Attestation.objects.exists()


def test_unverified_user_cannot_post(client, run, stranger):
    client.force_login(stranger)
    response = client.get(_url(run))
    assert response.status_code == 403
    assert "Verify your email address" in response.content.decode()
    response = client.post(_url(run), FORM)
    assert response.status_code == 403
    assert not Attestation.objects.exists()


def test_banned_user_cannot_post(client, run, owner, staff):
    from attestations.services import poster_ban

    poster_ban(user=owner, moderator=staff, reason="spam")
    client.force_login(owner)
    assert client.post(_url(run), FORM).status_code == 403
    assert not Attestation.objects.exists()


def test_unknown_run_is_404(client, owner):
    client.force_login(owner)
    assert client.get("/runs/deadbeef/attest/").status_code == 404


def test_csrf_is_enforced(run, owner):
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(owner)
    response = csrf_client.post(_url(run), FORM)
    assert response.status_code == 403
    assert not Attestation.objects.exists()
    # With the token from the form the same post goes through.
    page = csrf_client.get(_url(run))
    token = page.context["csrf_token"]
    response = csrf_client.post(_url(run), {**FORM, "csrfmiddlewaretoken": str(token)})
    assert response.status_code == 302
    assert Attestation.objects.count() == 1


def test_rate_limit_per_user(client, run, owner, settings):
    settings.COMMUNITY_RATE_LIMITS = {**settings.COMMUNITY_RATE_LIMITS, "attestation": (2, 3600)}
    client.force_login(owner)
    assert [client.post(_url(run), FORM).status_code for _ in range(3)] == [302, 302, 429]
    response = client.post(_url(run), FORM)
    assert response.status_code == 429
    assert "Too many requests" in response.content.decode()
    assert Attestation.objects.count() == 2


def test_one_account_does_not_use_up_a_shared_address(client, run, owner, other, settings):
    """Signed-in users are limited per account; the address only by the far higher bound for
    all accounts behind it."""
    settings.COMMUNITY_RATE_LIMITS = {**settings.COMMUNITY_RATE_LIMITS, "attestation": (2, 3600)}
    settings.COMMUNITY_IP_RATE_LIMITS = {
        **settings.COMMUNITY_IP_RATE_LIMITS,
        "attestation": (4, 3600),
    }
    client.force_login(owner)
    assert [client.post(_url(run), FORM).status_code for _ in range(3)] == [302, 302, 429]
    client.force_login(other)
    assert client.post(_url(run), FORM).status_code == 302
    # Five writes from the address: the bound for all accounts behind it.
    assert client.post(_url(run), FORM).status_code == 429
    assert Attestation.objects.count() == 3

"""API answers that the outside test broke (issue 9, defects 7, 8 and 10)."""

from __future__ import annotations

from rest_framework.test import APIClient

from attestations import services
from attestations.models import Attestation
from tests.factories_attestations import AttestationFactory


def _api(user) -> APIClient:
    api = APIClient()
    _, raw = services.token_create(user=user, name="test")
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


def test_api_and_form_share_the_bound_on_values(client, run, owner):
    """Defect 7: a median of 9,999,999,999,999 ms overflowed the bigint column from the API."""
    item = AttestationFactory(run=run, author=owner)
    api = _api(owner)
    response = api.patch(
        f"/api/v1/attestations/{item.pk}/",
        {"median": "9999999999999", "input_unit": "ms"},
        format="json",
    )
    assert response.status_code == 422  # well-formed, but beyond what the column holds
    assert "too large" in str(response.json()["median"])
    response = api.post(
        "/api/v1/attestations/",
        {"run": run.public_id, "kind": "reproduction", "median": "1e15", "input_unit": "ms"},
        format="json",
    )
    assert response.status_code == 422
    client.force_login(owner)
    page = client.post(
        f"/runs/{run.public_id}/attest/",
        {"kind": "reproduction", "median": "9999999999999", "input_unit": "ms"},
    )
    assert page.status_code == 200 and "That value is too large." in page.content.decode()
    assert Attestation.objects.count() == 1


def test_nul_bytes_in_urls_and_bodies_are_400(run, owner):
    """Defect 8: a NUL byte reached PostgreSQL and answered 500."""
    anonymous = APIClient()
    for url in (
        "/api/v1/attestations/?run=a%00b",
        "/api/v1/runs/lookup/?source=a%00&external_id=x",
        "/api/v1/groups/?benchmark=a%00b",
        "/api/v1/benchmarks/a%00b/",
        "/benchmarks/a%00b/",
        "/users/a%00b/",
        "/runs/?q=%00",
    ):
        status = anonymous.get(url).status_code
        assert 400 <= status < 500, (url, status)
    api = _api(owner)
    for url, body in (
        ("/api/v1/attestations/", {"run": "a\x00b", "kind": "note", "body": "x"}),
        ("/api/v1/reports/", {"run": "a\x00b", "category": "other", "text": "x"}),
        ("/api/v1/attestations/", {"run": "x" * 5000, "kind": "note", "body": "x"}),
        ("/api/v1/attestations/", {"run": ["a"], "kind": "note", "body": "x"}),
    ):
        response = api.post(url, body, format="json")
        assert response.status_code == 400, (url, response.status_code)
        assert "run" in response.json()


def test_withdraw_is_an_action_that_answers_post_only(run, owner):
    """Defect 10: GET and PATCH on the withdraw URL read and edited the item."""
    item = AttestationFactory(run=run, author=owner, body="before")
    api = _api(owner)
    url = f"/api/v1/attestations/{item.pk}/withdraw/"
    assert api.get(url).status_code == 405
    assert api.patch(url, {"body": "after"}, format="json").status_code == 405
    item.refresh_from_db()
    assert item.body == "before"
    assert api.post(url).status_code == 200
    item.refresh_from_db()
    assert item.state == "withdrawn"

"""/api/v1/attestations/ and /api/v1/reports/: the same writes as the pages."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from attestations import services
from attestations.models import Attestation, Report
from tests.factories_attestations import AttestationFactory

BODY = {
    "kind": "reproduction",
    "median": "390.5",
    "p20": "389.9",
    "p80": "391.25",
    "input_unit": "us",
    "cuda_version": "12.8",
    "body": "via the API",
}


@pytest.fixture
def api():
    return APIClient()


def _bearer(api: APIClient, user) -> str:
    _, raw = services.token_create(user=user, name="test")
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return raw


def test_create_with_token(api, run, owner):
    _bearer(api, owner)
    on_its_gpu = {**BODY, "run": run.public_id, "gpu": run.environment.gpu.slug}
    response = api.post("/api/v1/attestations/", on_its_gpu, format="json")
    assert response.status_code == 201, response.content
    data = response.json()
    assert (data["state"], data["author"], data["run"]) == ("pending", "alice", run.public_id)
    assert (data["median"], data["p20"], data["p80"], data["unit"]) == (
        390_500,
        389_900,
        391_250,
        "ns",
    )
    assert data["delta_percent"] == pytest.approx((390_500 - 385_536) * 100 / 385_536)
    assert data["not_comparable"] == "" and data["measured"] is False


def test_create_anonymous_and_bad_token(api, run):
    response = api.post("/api/v1/attestations/", {**BODY, "run": run.public_id}, format="json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    api.credentials(HTTP_AUTHORIZATION="Bearer ki_not-a-token")
    response = api.post("/api/v1/attestations/", {**BODY, "run": run.public_id}, format="json")
    assert response.status_code == 401
    assert not Attestation.objects.exists()


def test_revoked_token_is_refused(api, run, owner):
    raw = _bearer(api, owner)
    token = services.ApiToken.objects.get()
    services.token_revoke(token=token, user=owner)
    assert services.token_authenticate(raw) is None
    response = api.post("/api/v1/attestations/", {**BODY, "run": run.public_id}, format="json")
    assert response.status_code == 401


@pytest.mark.parametrize(
    "change, field, status",
    [
        # 400: not what the schema describes; 404: names nothing; 422: a rule beyond the schema.
        ({"run": "deadbeef"}, "run", 404),
        ({"run": "not-an-id"}, "run", 400),
        ({"kind": "rumour"}, "kind", 400),
        ({"median": "fast"}, "median", 400),
        ({"medain": "1"}, "body", 400),
        ({"input_unit": "B"}, "input_unit", 422),
        ({"p20": "999"}, "median", 422),
        ({"body": "x" * 20_001}, "body", 400),
        ({"commit_url": "javascript:alert(1)"}, "commit_url", 400),
        ({"commit_url": "ftp://example.org/x"}, "commit_url", 400),
    ],
)
def test_bad_input_is_4xx_with_message(api, run, owner, change, field, status):
    _bearer(api, owner)
    response = api.post(
        "/api/v1/attestations/", {**BODY, "run": run.public_id, **change}, format="json"
    )
    assert response.status_code == status
    assert field in response.json()
    assert not Attestation.objects.exists()


def test_unverified_is_403(api, run, stranger):
    _bearer(api, stranger)
    response = api.post("/api/v1/attestations/", {**BODY, "run": run.public_id}, format="json")
    assert response.status_code == 403
    assert "Verify your email" in response.json()["detail"]


def test_session_auth_needs_csrf(run, owner):
    api = APIClient(enforce_csrf_checks=True)
    api.force_login(owner)
    response = api.post("/api/v1/attestations/", {**BODY, "run": run.public_id}, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert not Attestation.objects.exists()


def test_list_and_detail_visibility(api, run, owner, other):
    mine = AttestationFactory(run=run, author=owner)
    theirs = AttestationFactory(run=run, author=other)
    public = AttestationFactory(run=run, author=other, state="approved")
    ids = {item["id"] for item in api.get("/api/v1/attestations/").json()["results"]}
    assert ids == {public.pk}
    _bearer(api, owner)
    ids = {
        item["id"]
        for item in api.get(f"/api/v1/attestations/?run={run.public_id}").json()["results"]
    }
    assert ids == {public.pk, mine.pk}
    assert api.get("/api/v1/attestations/?run=ffffffff").json()["results"] == []
    assert api.get(f"/api/v1/attestations/{mine.pk}/").status_code == 200
    assert api.get(f"/api/v1/attestations/{theirs.pk}/").status_code == 404


@pytest.mark.parametrize(
    "who, status", [("owner", 200), ("other", 404), ("stranger", 404), ("anonymous", 401)]
)
def test_patch_matrix(api, request, run, owner, who, status):
    item = AttestationFactory(run=run, author=owner, body="before")
    if who != "anonymous":
        _bearer(api, request.getfixturevalue(who))
    response = api.patch(
        f"/api/v1/attestations/{item.pk}/",
        {"body": "after", "median": "0.4", "input_unit": "ms"},
        format="json",
    )
    assert response.status_code == status
    item.refresh_from_db()
    if who == "owner":
        assert (item.body, item.median, item.p20, item.p80) == ("after", 400_000, None, None)
    else:
        assert item.body == "before"


def test_patch_body_only_keeps_values(api, run, owner):
    item = AttestationFactory(run=run, author=owner)
    before = (item.median, item.p20, item.p80)
    _bearer(api, owner)
    response = api.patch(f"/api/v1/attestations/{item.pk}/", {"body": "x"}, format="json")
    assert response.status_code == 200
    item.refresh_from_db()
    assert (item.median, item.p20, item.p80) == before


def test_patch_approved_is_409(api, run, owner):
    item = AttestationFactory(run=run, author=owner, state="approved", body="kept")
    _bearer(api, owner)
    response = api.patch(f"/api/v1/attestations/{item.pk}/", {"body": "x"}, format="json")
    assert response.status_code == 409
    item.refresh_from_db()
    assert item.body == "kept"


@pytest.mark.parametrize(
    "who, status", [("owner", 200), ("other", 404), ("stranger", 404), ("anonymous", 401)]
)
def test_withdraw_matrix(api, request, run, owner, who, status):
    item = AttestationFactory(run=run, author=owner)
    if who != "anonymous":
        _bearer(api, request.getfixturevalue(who))
    assert api.post(f"/api/v1/attestations/{item.pk}/withdraw/").status_code == status
    item.refresh_from_db()
    assert item.state == ("withdrawn" if who == "owner" else "pending")


def test_reports(api, run, owner, other):
    _bearer(api, owner)
    response = api.post(
        "/api/v1/reports/",
        {"run": run.public_id, "category": "duplicate", "text": "Same as 0000abcd"},
        format="json",
    )
    assert response.status_code == 201
    assert response.json()["state"] == "open"
    assert (
        api.post(
            "/api/v1/reports/", {"run": run.public_id, "category": "x", "text": "y"}, format="json"
        ).status_code
        == 400
    )
    assert [r["text"] for r in api.get("/api/v1/reports/").json()["results"]] == [
        "Same as 0000abcd"
    ]
    _bearer(api, other)
    assert api.get("/api/v1/reports/").json()["results"] == []
    api.credentials()
    assert api.get("/api/v1/reports/").status_code in (401, 403)
    assert Report.objects.count() == 1


def test_rate_limit_429(api, run, owner, settings):
    settings.COMMUNITY_RATE_LIMITS = {**settings.COMMUNITY_RATE_LIMITS, "attestation": (2, 3600)}
    _bearer(api, owner)
    codes = [
        api.post("/api/v1/attestations/", {**BODY, "run": run.public_id}, format="json").status_code
        for _ in range(3)
    ]
    assert codes == [201, 201, 429]
    last = api.post("/api/v1/attestations/", {**BODY, "run": run.public_id}, format="json")
    assert "Too many requests" in last.json()["detail"]
    assert Attestation.objects.count() == 2


def test_listed_in_openapi_schema():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    paths = schema["paths"]
    assert {"post", "get"} <= set(paths["/api/v1/attestations/"])
    assert {"get", "patch"} <= set(paths["/api/v1/attestations/{id}/"])
    assert "post" in paths["/api/v1/attestations/{id}/withdraw/"]
    assert {"post", "get"} <= set(paths["/api/v1/reports/"])
    assert schema["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"


@pytest.mark.parametrize("count", [1, 10])
def test_list_query_count_is_constant(api, owner, django_assert_max_num_queries, count):
    from tests.factories import RunFactory

    for _ in range(count):
        AttestationFactory(run=RunFactory(), author=owner, state="approved")
    with django_assert_max_num_queries(2):
        response = api.get("/api/v1/attestations/")
    assert len(response.json()["results"]) == count

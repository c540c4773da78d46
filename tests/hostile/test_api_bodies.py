"""Hostile bodies on every API write, with a valid token: nesting 100,000 deep, a NUL in every
text field (JSON and form-encoded), huge and non-finite numbers. Each is a 400 that says what
is wrong, never a 500, and nothing is written. The writes come from the OpenAPI schema, so an
endpoint added later is covered. Under PostgreSQL (CI) a NUL that reached a query was a 500."""

from __future__ import annotations

import json

import pytest
from drf_spectacular.generators import SchemaGenerator

from attestations import services
from attestations.models import Attestation, Report
from tests.factories import RunFactory
from tests.factories_attestations import AttestationFactory, verify_email

NUMBERS = ["1e400", "NaN", "Infinity", "-Infinity", "1" + "0" * 30, "1" + "0" * 5000]


def _writes() -> list[tuple[str, str, dict]]:
    """(method, path template, request body schema properties) of every API write."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    out = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if method not in ("post", "put", "patch", "delete"):
                continue
            content = operation.get("requestBody", {}).get("content", {})
            body = content.get("application/json", {}).get("schema", {})
            ref = body.get("$ref", "")
            properties = components[ref.rsplit("/", 1)[-1]]["properties"] if ref else {}
            out.append((method, path, properties))
    return out


WRITES = _writes()


@pytest.fixture
def world(db, alice, settings):
    # Each case is a write; the limits are not what is tested here.
    settings.COMMUNITY_RATE_LIMITS = {
        kind: (10_000, 3600) for kind in ("attestation", "report", "token")
    }
    settings.COMMUNITY_IP_RATE_LIMITS = settings.COMMUNITY_RATE_LIMITS
    verify_email(alice)
    run = RunFactory()
    item = AttestationFactory(run=run, author=alice, kind="note", body="mine")
    _, raw = services.token_create(user=alice, name="hostile")
    return {"run": run, "item": item, "auth": f"Bearer {raw}"}


def _url(path: str, world) -> str:
    return path.replace("{id}", str(world["item"].pk))


def _counts():
    return Attestation.objects.count(), Report.objects.count(), _bodies()


def _bodies():
    return sorted(Attestation.objects.values_list("pk", "body", "gpu_id", "state"))


def _send(client, method, url, body: str, world, content_type="application/json"):
    return getattr(client, method)(
        url, data=body, content_type=content_type, HTTP_AUTHORIZATION=world["auth"]
    )


def _refused(response, *words: str) -> None:
    assert response.status_code == 400, (response.status_code, response.content[:300])
    text = response.content.decode()
    assert all(word in text for word in words), text[:300]


def test_every_write_is_covered():
    assert {(m, p) for m, p, _ in WRITES} >= {
        ("post", "/api/v1/attestations/"),
        ("patch", "/api/v1/attestations/{id}/"),
        ("post", "/api/v1/reports/"),
    }


@pytest.mark.parametrize("method, path, properties", WRITES, ids=[f"{m} {p}" for m, p, _ in WRITES])
def test_a_body_nested_100000_deep(client, world, method, path, properties):
    before = _counts()
    for body in ("[" * 100_000, "[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1"):
        response = _send(client, method, _url(path, world), body, world)
        if not properties:  # the endpoint reads no body (withdraw): it must not fault on one
            assert response.status_code < 500
            return
        _refused(response, "nested deeper than 32 levels")
    assert _counts() == before


def _valid_body(properties: dict, world) -> dict:
    body = {"run": world["run"].public_id, "kind": "note", "body": "x", "category": "other",
            "text": "x"}  # fmt: skip
    return {k: v for k, v in body.items() if k in properties}


def _text_fields(properties: dict) -> list[str]:
    return [
        name
        for name, prop in properties.items()
        if prop.get("type") == "string" and not prop.get("readOnly")
    ]


@pytest.mark.parametrize("method, path, properties", WRITES, ids=[f"{m} {p}" for m, p, _ in WRITES])
def test_a_nul_in_every_text_field(client, world, method, path, properties):
    fields = _text_fields(properties) + (["gpu"] if "gpu" in properties else [])
    if not properties:
        pytest.skip(f"{method} {path} takes no body")
    assert fields
    before = _counts()
    for field in fields:
        body = _valid_body(properties, world) | {field: "a\x00b"}
        response = _send(client, method, _url(path, world), json.dumps(body), world)
        _refused(response, "NUL")
        # Form-encoded, the JSON parser's check is not on the path: the fields' own are.
        response = getattr(client, method)(
            _url(path, world),
            data=body,
            HTTP_AUTHORIZATION=world["auth"],
            **({"content_type": "application/x-www-form-urlencoded"} if method == "patch" else {}),
        )
        assert response.status_code == 400, (field, response.status_code, response.content[:300])
    assert _counts() == before


@pytest.mark.parametrize("method, path, properties", WRITES, ids=[f"{m} {p}" for m, p, _ in WRITES])
def test_huge_and_non_finite_numbers(client, world, method, path, properties):
    if not properties:
        pytest.skip(f"{method} {path} takes no body")
    before = _counts()
    targets = [name for name in ("median", "p20", "p80") if name in properties] or ["run"]
    for name in targets:
        for number in NUMBERS:
            fields = _valid_body(properties, world) | {name: "NUMBER"}
            body = json.dumps(fields).replace('"NUMBER"', number)
            response = _send(client, method, _url(path, world), body, world)
            _refused(response)
    assert _counts() == before

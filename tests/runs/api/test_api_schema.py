"""The OpenAPI schema states what the API enforces, and the docs page reads well from it:
shared error answers once, list items' fields, exports described, upstream names as they are."""

from __future__ import annotations

import re

import pytest
from drf_spectacular.generators import SchemaGenerator
from jsonschema import Draft4Validator

from kilib.schema import ERRORS


@pytest.fixture(scope="module")
def schema():
    return SchemaGenerator().get_schema(request=None, public=True)


def _param(schema, path, name, method="get"):
    return next(p for p in schema["paths"][path][method]["parameters"] if p["name"] == name)


def test_the_bounds_the_api_enforces_are_in_the_schema(schema):
    assert _param(schema, "/api/v1/runs/", "page_size")["schema"] == {
        "type": "integer", "minimum": 1, "maximum": 500,
    }  # fmt: skip
    for path, name in (
        ("/api/v1/groups/{key}/", "key"),
        ("/api/v1/environments/{digest}/", "digest"),
    ):
        pattern = _param(schema, path, name)["schema"]["pattern"]
        assert not re.match(pattern, "0") and re.match(pattern, "0" * 64)
    for name in ("source", "external_id"):
        assert _param(schema, "/api/v1/runs/lookup/", name)["schema"]["minLength"] == 1
    # A NUL is refused everywhere; free text says so.
    assert _param(schema, "/api/v1/runs/", "q")["schema"]["pattern"] == "^[^\\x00]*$"


def test_benchmark_slugs_are_upstream_names(schema):
    component = schema["components"]["schemas"]["Benchmark"]
    Draft4Validator(component).validate(
        {"slug": "dyt_beta=False", "title": "x", "url": "https://example.org/", "runs": 1}
    )


def test_the_exports_are_in_the_schema(schema):
    for path, media in (("/api/v1/runs/export.csv", "text/csv"),
                        ("/api/v1/runs/export.jsonl", "application/jsonl")):  # fmt: skip
        operation = schema["paths"][path]["get"]
        assert media in operation["responses"]["200"]["content"]
        names = {p["name"] for p in operation["parameters"]}
        assert {"benchmark", "gpu", "evidence", "after"} <= names and "cursor" not in names
    assert "leading '" in schema["paths"]["/api/v1/runs/export.csv"]["get"]["description"]


def test_shared_errors_are_referred_to_not_repeated(schema):
    for operations in schema["paths"].values():
        for operation in operations.values():
            for code, (name, _) in ERRORS.items():
                assert operation["responses"][code] == {"$ref": f"#/components/responses/{name}"}


def test_request_bodies_take_only_their_fields(schema):
    content = schema["paths"]["/api/v1/attestations/"]["post"]["requestBody"]["content"]
    json_body = content["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    form_body = content["multipart/form-data"]["schema"]["$ref"].rsplit("/", 1)[-1]
    components = schema["components"]["schemas"]
    assert components[json_body]["additionalProperties"] is False
    assert components[json_body]["properties"]["median"]["nullable"] is True
    assert "nullable" not in components[form_body]["properties"]["median"]


def test_the_docs_page_lists_errors_once_and_what_lists_hold(client, db):
    page = client.get("/api/v1/docs/").content.decode()
    assert page.count("Too many requests.") == 1
    assert page.count("No credentials, or an unknown or revoked token.") == 1
    # A list response names its items' fields, not just "results array".
    assert "results[].public_id" in page and "array of Run" in page
    row = re.search(r"<code>commit_url</code>.*?</td><td>(.*?)</td>", page, re.S)
    assert row and "object" not in row.group(1) and "string" in row.group(1)
    assert "GET /api/v1/runs/export.csv" in page and "GET /api/v1/runs/export.jsonl" in page
    # Field tables fold under their heading: the page is an index, each table a click away.
    assert page.count("<details><summary><h3>Response 200") >= 10
    assert page.count("<h3>Response 4") == 0

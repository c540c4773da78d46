"""The REST API under /api/v1/: lists with the run filters and cursor pagination, details,
lookup by external id, streamed exports, the OpenAPI schema, and 4xx for malformed queries."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema

from runs.models import Environment, Run
from tests.conftest import EXAMPLE_EXTERNAL_ID
from tests.factories import RunFactory
from tests.pages import grow, queries


def test_run_detail_and_lookup(client, example_run):
    detail = client.get(f"/api/v1/runs/{example_run.public_id}/")
    assert detail.status_code == 200 and detail["Content-Type"] == "application/json"
    data = detail.json()
    assert data["median"] == 385536 and data["p20"] == 384685 and data["p80"] == 386240
    assert data["rank"] == 2 and data["unit"] == "ns" and data["evidence"] == "reported"
    assert data["protocol_digest"].startswith("sha256:a79eaf4d")
    assert data["environment_digest"].startswith("sha256:2750ae38")
    assert data["source_metrics"]["ms_50"] == 0.38553598523139954
    assert data["manifest"] == f"/runs/{example_run.public_id}.json"
    found = client.get(
        "/api/v1/runs/lookup/",
        {"source": "liger-kernel-bench", "external_id": EXAMPLE_EXTERNAL_ID},
    )
    assert found.status_code == 200 and found.json()["public_id"] == example_run.public_id


def test_run_list_filters_and_cursor(client, liger_bench):
    first = client.get("/api/v1/runs/", {"benchmark": "llama4_rope", "ordering": "median"})
    assert first.status_code == 200
    page = first.json()
    expected = Run.objects.public().filter(benchmark__slug="llama4_rope").count()
    seen = [r["public_id"] for r in page["results"]]
    medians = [r["median"] for r in page["results"]]
    assert medians == sorted(medians) and page["next"]
    while page["next"]:
        page = client.get(page["next"]).json()
        seen += [r["public_id"] for r in page["results"]]
    assert len(seen) == len(set(seen)) == expected
    # Several sort keys: the first leads, the rest break its ties.
    both = client.get("/api/v1/runs/", {"benchmark": "llama4_rope", "ordering": "-median,observed"})
    medians = [r["median"] for r in both.json()["results"]]
    assert both.status_code == 200 and medians == sorted(medians, reverse=True)


def test_groups_with_ranks_and_other_endpoints(client, example_run):
    key = example_run.group.key.removeprefix("sha256:")
    group = client.get(f"/api/v1/groups/{key}/").json()
    assert [(r["rank"], r["implementation"]) for r in group["runs"]] == [
        (1, "Liger-Kernel"),
        (2, "Transformers"),
    ]
    groups = client.get("/api/v1/groups/", {"benchmark": "llama4_rope", "metric": "latency"})
    assert groups.status_code == 200 and groups.json()["results"]
    bench = client.get("/api/v1/benchmarks/llama4_rope/").json()
    assert bench["title"] == "Llama 4 rotary position embedding" and bench["runs"] > 0
    assert client.get("/api/v1/benchmarks/").json()["results"]
    assert client.get("/api/v1/sources/").json()[0]["slug"] == "liger-kernel-bench"
    assert client.get("/api/v1/sources/liger-kernel-bench/").json()["license"] == "BSD-2-Clause"
    env = Environment.objects.first()
    one = client.get(f"/api/v1/environments/{env.digest.removeprefix('sha256:')}/").json()
    assert one["gpu"]["peak_bandwidth_gbs"] == env.gpu.peak_bandwidth_gbs
    assert client.get("/api/v1/environments/").json()["results"]


def test_exports_stream_the_filtered_set(client, liger_bench):
    expected = Run.objects.public().filter(benchmark__slug="llama4_rope").count()
    response = client.get("/api/v1/runs/export.csv", {"benchmark": "llama4_rope"})
    assert response.streaming and response["Content-Type"] == "text/csv; charset=utf-8"
    *rows, end = csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()))
    assert len(rows) == expected and {r["benchmark"] for r in rows} == {"llama4_rope"}
    assert end["public_id"] == f"# end rows={expected} sha256={end['public_id'][-64:]}"
    lines = client.get("/api/v1/runs/export.jsonl", {"benchmark": "llama4_rope"})
    assert lines["Content-Type"] == "application/jsonl; charset=utf-8"
    *records, end = [json.loads(x) for x in b"".join(lines.streaming_content).splitlines()]
    assert len(records) == expected and records[0]["digest"].startswith("sha256:")
    assert end["export"] == "end" and end["rows"] == expected


MALFORMED = [
    ("/api/v1/runs/", {"timed_pass": "sideways"}, "timed_pass"),
    ("/api/v1/runs/", {"evidence": "gold"}, "evidence"),
    ("/api/v1/runs/", {"ordering": "price"}, "ordering"),
    ("/api/v1/runs/", {"ordering": "median,price"}, "ordering"),
    ("/api/v1/runs/", {"cursor": "bm90LWEtY3Vyc29y"}, "cursor"),
    ("/api/v1/runs/", {"page_size": "0"}, "page_size"),
    ("/api/v1/runs/", {"colour": "red"}, "query"),
    ("/api/v1/runs/lookup/", {"source": "liger-kernel-bench"}, "external_id"),
    ("/api/v1/runs/lookup/", {"source": "x", "external_id": "y", "z": "1"}, "query"),
    ("/api/v1/runs/export.csv", {"metric": "speed"}, "metric"),
    ("/api/v1/runs/export.jsonl", {"colour": "red"}, "query"),
    ("/api/v1/runs/export.csv", {"after": "-1"}, "after"),
    ("/api/v1/runs/deadbeef/", {"colour": "red"}, "query"),
    ("/api/v1/benchmarks/", {"cursor": "%%%"}, "cursor"),
    ("/api/v1/benchmarks/", {"ordering": "title"}, "query"),
    ("/api/v1/benchmarks/llama4_rope/", {"x": "1"}, "query"),
    ("/api/v1/groups/", {"metric": "speed"}, "metric"),
    ("/api/v1/groups/", {"timed_pass": "sideways"}, "timed_pass"),
    ("/api/v1/groups/", {"cursor": "garbage"}, "cursor"),
    ("/api/v1/groups/nothex/", {}, "key"),
    ("/api/v1/sources/", {"ordering": "name"}, "query"),
    ("/api/v1/sources/liger-kernel-bench/", {"x": "1"}, "query"),
    ("/api/v1/environments/", {"cursor": "garbage"}, "cursor"),
    ("/api/v1/environments/xyz/", {}, "digest"),
]


@pytest.mark.parametrize(("url", "params", "field"), MALFORMED)
def test_malformed_queries_are_4xx_with_a_message(client, db, url, params, field):
    response = client.get(url, params)
    assert 400 <= response.status_code < 500, (url, params, response.status_code)
    body = response.json()
    assert field in body and body[field], body


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/runs/ffffffff/",
        "/api/v1/benchmarks/nope/",
        "/api/v1/sources/nope/",
        "/api/v1/groups/" + "0" * 64 + "/",
        "/api/v1/environments/" + "0" * 64 + "/",
    ],
)
def test_unknown_objects_are_404_with_a_message(client, url):
    response = client.get(url)
    assert response.status_code == 404 and response.json()["detail"]


def test_lookup_of_unknown_external_id_is_404(client, example_run):
    response = client.get(
        "/api/v1/runs/lookup/", {"source": "liger-kernel-bench", "external_id": "x"}
    )
    assert response.status_code == 404 and "external id" in response.json()["detail"]


@pytest.mark.django_db
def test_openapi_schema_validates(client):
    schema = SchemaGenerator().get_schema(request=None, public=True)
    validate_schema(schema)  # raises on an invalid OpenAPI 3 document
    paths = set(schema["paths"])
    for expected in [
        "/api/v1/runs/",
        "/api/v1/runs/{public_id}/",
        "/api/v1/runs/lookup/",
        "/api/v1/benchmarks/",
        "/api/v1/groups/{key}/",
        "/api/v1/sources/",
        "/api/v1/environments/",
    ]:
        assert expected in paths
    run_params = {p["name"] for p in schema["paths"]["/api/v1/runs/"]["get"]["parameters"]}
    assert {"benchmark", "gpu", "evidence", "cursor", "ordering", "q"} <= run_params
    served = client.get("/api/v1/schema/")
    assert served.status_code == 200 and served["Content-Type"].startswith(
        "application/vnd.oai.openapi"
    )


@pytest.mark.django_db
def test_the_schema_served_once_per_process_is_the_one_drf_spectacular_generates(client):
    """/schema/ serves the schema generated once per process (runs.api.views._schema), in
    both formats, and it is what drf-spectacular's own view generates for the request."""
    from drf_spectacular.views import SpectacularAPIView
    from rest_framework.test import APIRequestFactory

    as_json = "application/vnd.oai.openapi+json"
    own = SpectacularAPIView.as_view()(
        APIRequestFactory().get("/api/v1/schema/", HTTP_ACCEPT=as_json)
    )
    own.render()
    served = client.get("/api/v1/schema/", HTTP_ACCEPT=as_json)
    assert served.status_code == 200 and served["Content-Type"].startswith(as_json)
    assert json.loads(served.content) == json.loads(own.content)
    as_yaml = client.get("/api/v1/schema/")
    assert as_yaml["Content-Type"].startswith("application/vnd.oai.openapi")
    assert 'filename="' in as_yaml["Content-Disposition"]
    assert b"/api/v1/runs/lookup/:" in as_yaml.content


@pytest.mark.django_db
def test_api_root_lists_every_endpoint(client, settings):
    response = client.get("/api/v1/")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    body = response.json()
    paths = {e["path"]: e for e in body["endpoints"]}
    for expected in ["/api/v1/runs/", "/api/v1/runs/lookup/", "/api/v1/benchmarks/",
                     "/api/v1/attestations/", "/api/v1/reports/"]:  # fmt: skip
        assert expected in paths, expected
        assert paths[expected]["summary"], expected
    # From the site's one origin (SITE_ROOT off DEBUG), not the request's Host header.
    assert paths["/api/v1/runs/"]["url"] == settings.SITE_ROOT + "/api/v1/runs/"
    assert paths["/api/v1/attestations/"]["methods"] == ["GET", "POST"]
    assert body["docs"].endswith("/api/v1/docs/") and body["schema"].endswith("/api/v1/schema/")


@pytest.mark.django_db
def test_docs_page_speaks_to_users_and_documents_bodies(client):
    """Every endpoint has a summary of its own; no internal docstring, no raw markdown; writes
    document their request body with an example."""
    html = client.get("/api/v1/docs/").content.decode()
    schema = SchemaGenerator().get_schema(request=None, public=True)
    for path, methods in schema["paths"].items():
        for method, op in methods.items():
            assert op.get("summary"), (method, path)
    for internal in ["Reject query parameters", "Attach the shared catalogue", "* `"]:
        assert internal not in html, internal
    post = html.split('id="post-api-v1-attestations"')[1].split("</section>")[0]
    assert "Request body (JSON)" in post and "<code>kind</code> (required)" in post
    assert "reproduction, note" in post  # the enum's values, not markdown
    assert "&quot;median&quot;: &quot;393.632&quot;" in post  # an example body
    get = html.split('id="get-api-v1-attestations"')[1].split("</section>")[0]
    assert get.count("Request body") == 0 and "Response 200" in get


@pytest.mark.django_db
def test_docs_page_needs_no_external_assets(client):
    response = client.get("/api/v1/docs/")
    html = response.content.decode()
    assert response.status_code == 200 and "/api/v1/runs/{public_id}/" in html
    # No CDN: every script and stylesheet the page loads is served from this site.
    assert not re.search(r'<(script|link)[^>]+(src|href)="(https?:)?//', html)


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/api/v1/docs/", "/api/v1/schema/"])
def test_docs_and_schema_are_public_pages(client, url):
    """Anonymous readers get them from the page cache after the first, with an ETag."""
    first = client.get(url)
    assert first["X-Page-Cache"] == "miss" and first["ETag"]
    again = client.get(url)
    assert again["X-Page-Cache"] == "hit" and again.content == first.content
    assert client.get(url, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304


@pytest.mark.django_db
def test_api_detail_and_list_query_counts_do_not_grow(client, settings):
    settings.PAGE_CACHE_SECONDS = 0
    run = RunFactory(rank=1)
    RunFactory.create_batch(19)
    key = run.group.key.removeprefix("sha256:")
    urls = [f"/api/v1/runs/{run.public_id}/", "/api/v1/runs/", f"/api/v1/groups/{key}/"]
    small = [queries(client, url) for url in urls]
    grow(400)
    RunFactory.create_batch(30)  # the group grows too
    assert [queries(client, url) for url in urls] == small


@pytest.mark.django_db
def test_cached_api_pages_keep_json_and_html_apart(client, settings):
    settings.PAGE_CACHE_SECONDS = 300
    RunFactory()
    html = client.get("/api/v1/runs/", HTTP_ACCEPT="text/html")
    assert html["Content-Type"].startswith("text/html")
    data = client.get("/api/v1/runs/", HTTP_ACCEPT="application/json")
    assert data["Content-Type"] == "application/json" and data.json()["results"]
    assert "Accept" in data["Vary"]
    again = client.get("/api/v1/runs/", HTTP_ACCEPT="application/json")
    assert again["X-Page-Cache"] == "hit" and again["Content-Type"] == "application/json"


@pytest.mark.django_db
def test_the_api_shows_a_data_change_at_once(client, settings):
    settings.PAGE_CACHE_SECONDS = 0
    run = RunFactory(rank=1)
    first = client.get("/api/v1/runs/").json()["results"][0]
    assert first["public_id"] == run.public_id and first["evidence"] == "reported"
    Run.objects.filter(pk=run.pk).update(evidence="checked", rank=2)  # the trigger, no signal
    listed = client.get("/api/v1/runs/").json()["results"][0]
    detail = client.get(f"/api/v1/runs/{run.public_id}/").json()
    assert (listed["evidence"], listed["rank"]) == ("checked", 2)
    assert (detail["evidence"], detail["rank"]) == ("checked", 2) and "labels" in detail


@pytest.mark.django_db
def test_listed_runs_are_the_serializer_s_representation(client, settings):
    """Cold or warm, the list is what the serializer makes of each run, field for field, in
    the list's order."""
    from rest_framework.renderers import JSONRenderer

    from runs.api.serializers import RunSerializer
    from runs.read import catalogue

    settings.PAGE_CACHE_SECONDS = 0
    RunFactory.create_batch(12)
    RunFactory(rank=None)
    expected_runs = list(Run.objects.public().for_run_page().order_by("-id"))
    catalogue.attach(expected_runs)
    expected = [dict(d) for d in RunSerializer(expected_runs, many=True).data]
    cold = client.get("/api/v1/runs/?page_size=20").json()["results"]
    warm = client.get("/api/v1/runs/?page_size=20").json()["results"]
    assert cold == warm == json.loads(JSONRenderer().render(expected))


@pytest.mark.django_db
def test_a_run_detail_is_kept_under_the_data_version(client, settings):
    """The detail reads the run data only: asked again it is one query (its versions), and a
    write to the run data shows at once. An unknown id is a 404 with its message, not kept."""
    settings.PAGE_CACHE_SECONDS = 0
    run = RunFactory()
    url = f"/api/v1/runs/{run.public_id}/"
    assert client.get(url).json()["evidence"] == "reported"
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    assert len(ctx) == 1
    Run.objects.filter(pk=run.pk).update(evidence="checked")
    assert client.get(url).json()["evidence"] == "checked"
    for _ in range(2):
        missing = client.get("/api/v1/runs/zzzzzzzz/")
        assert missing.status_code == 404 and missing.json()["detail"]


@pytest.mark.django_db
def test_a_benchmark_s_run_count_is_its_current_runs_read_from_the_tallies(client, settings):
    """/api/v1/benchmarks/ gives each benchmark's current runs from the tallies the write side
    keeps (runs/read/tallies.py), not a count over the runs: the same number, with a revision
    retired, and a statement that never reads runs_run."""
    settings.PAGE_CACHE_SECONDS = 0
    run = RunFactory()
    RunFactory.create_batch(4, benchmark=run.benchmark)
    Run.objects.filter(pk=run.pk).update(is_current=False)  # a retired revision
    with CaptureQueriesContext(connection) as seen:
        listed = client.get("/api/v1/benchmarks/").json()["results"]
    expected = {
        b.slug: Run.objects.filter(benchmark=b, is_current=True).count()
        for b in type(run.benchmark).objects.all()
    }
    assert {b["slug"]: b["runs"] for b in listed} == expected
    assert expected[run.benchmark.slug] == 4
    detail = client.get(f"/api/v1/benchmarks/{run.benchmark.slug}/").json()
    assert detail["runs"] == 4
    assert not any(Run._meta.db_table in q["sql"] for q in seen.captured_queries)

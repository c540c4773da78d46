"""The fidelity page and API per source (runs/fidelity/): every row of the committed table,
anchored; linked from the source page; in the API root and schema; a fixed few queries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runs.fidelity import table as fidelity
from tests.factories import SourceFactory
from tests.pages import queries, text_of

REPO = Path(__file__).resolve().parents[3]
TABLE = json.loads((REPO / "data/fidelity/liger-kernel-ci.json").read_text())


@pytest.fixture
def ci(db):
    return SourceFactory(slug="liger-kernel-ci", name="Liger-Kernel CI")


def test_the_page_shows_every_row_anchored_with_its_figures(ci, client):
    response = client.get("/sources/liger-kernel-ci/fidelity/")
    assert response.status_code == 200
    html = response.content.decode()
    for row in TABLE["rows"]:
        assert f'<tr id="{row["anchor"]}" class="fidelity-{row["status"]}">' in html
    text = text_of(response)
    established = [r for r in TABLE["rows"] if r["status"] == "established"]
    assert f"established {len(established)}" in text
    # A row's figures are the table's: the device-bound ratio of cross_entropy's forward.
    row = next(r for r in established if r["anchor"] == "cross_entropy-forward-latency-huggingface")
    stats = row["deviceBound"]
    assert f"{stats['median']:.3f} ({stats['min']:.3f}-{stats['max']:.3f})" in text
    assert TABLE["generatedBy"] in text


def test_the_source_page_links_to_it(ci, client):
    html = client.get("/sources/liger-kernel-ci/").content.decode()
    assert 'href="/sources/liger-kernel-ci/fidelity/"' in html


def test_a_source_without_a_table_says_not_measured(db, client):
    SourceFactory()  # liger-kernel-bench
    assert "Fidelity not measured" in text_of(client.get("/sources/liger-kernel-bench/fidelity/"))
    body = client.get("/api/v1/sources/liger-kernel-bench/fidelity/").json()
    assert body == {"source": "liger-kernel-bench", "measured": False, "rows": []}


def test_an_unknown_source_is_a_404_that_says_so(db, client):
    page = client.get("/sources/nothing-here/fidelity/")
    assert page.status_code == 404
    assert "No source has this name" in page.content.decode()
    api = client.get("/api/v1/sources/nothing-here/fidelity/")
    assert api.status_code == 404
    assert "No source has this name" in api.json()["detail"]


def test_the_api_gives_each_row_with_its_link(ci, client):
    body = client.get("/api/v1/sources/liger-kernel-ci/fidelity/").json()
    assert body["measured"] is True
    assert len(body["rows"]) == len(TABLE["rows"])
    by_anchor = {r["anchor"]: r for r in body["rows"]}
    row = by_anchor["geglu-full-memory-liger"]
    assert row["url"] == "/sources/liger-kernel-ci/fidelity/#geglu-full-memory-liger"
    assert row["status"] == "established"
    assert row["timed_pass"] == "full"
    committed = next(r for r in TABLE["rows"] if r["anchor"] == "geglu-full-memory-liger")
    assert row["memory"]["maxDiffMiB"] == committed["memory"]["maxDiffMiB"]
    assert row["gpu"] == committed["gpu"]
    # A memory row measured against upstream's own repeat (bench/fidelity/script_cells.py)
    # gives that repeat; one that was not gives none of it.
    repeated = by_anchor["kto_loss-full-memory-huggingface"]["memory"]
    assert (repeated["scriptRepeatMiB"], repeated["scriptRepeatCells"]) == (1.0, 5)
    assert repeated["scriptRepeatSameRequest"] == 5
    assert "scriptRepeatMiB" not in row["memory"]
    assert client.get("/api/v1/sources/liger-kernel-ci/fidelity/?x=1").status_code == 400


def test_the_api_root_and_schema_list_it(db, client):
    paths = [e["path"] for e in client.get("/api/v1/").json()["endpoints"]]
    assert "/api/v1/sources/{slug}/fidelity/" in paths
    schema = client.get("/api/v1/schema/", HTTP_ACCEPT="application/json").content.decode()
    assert "FidelityTable" in schema


def test_the_page_and_api_ask_a_fixed_few_queries(ci, client, settings):
    settings.PAGE_CACHE_SECONDS = 0
    SourceFactory()
    for url in ("/sources/{}/fidelity/", "/api/v1/sources/{}/fidelity/"):
        counts = {queries(client, url.format(s)) for s in ("liger-kernel-ci", "liger-kernel-bench")}
        assert len(counts) == 1 and counts.pop() <= 3, url


def test_the_page_and_api_say_which_commit_each_row_was_measured_at(db, client):
    """A row says the upstream commits of the script it was measured beside, and the page
    lists the scripts whose rows do not carry to another commit (data/fidelity/script-changes)."""
    from tests.factories import SourceFactory

    SourceFactory(slug="liger-kernel-ci", name="Liger-Kernel CI")
    page = client.get("/sources/liger-kernel-ci/fidelity/").content.decode()
    assert "<code>benchmark/scripts/benchmark_dyt.py</code>, rewritten at c2f4c020" in page
    data = client.get("/api/v1/sources/liger-kernel-ci/fidelity/").json()
    by_key = {(r["kernel"], r["provider"], r["timed_pass"], r["metric"]): r for r in data["rows"]}
    dyt_memory = by_key[("dyt_beta=False", "torch_compile", "full", "memory")]
    assert dyt_memory["upstream_commits"] == ["02bac05", "ab7fe2a"]
    assert by_key[("kl_div", "torch", "forward", "latency")]["upstream_commits"] == ["ab7fe2a"]
    assert set(data["script_changes"]) == {"dyt_beta=False", "dyt_beta=True", "geglu", "swiglu"}
    assert by_key[("rope", "liger", "full", "memory")]["upstream_commits"] == ["1fdb668"]
    # Every row of the table is measured on the H100 now; a row that is not lists no commit.
    assert fidelity.measured_at("liger-kernel-ci", {"status": fidelity.NOT_MEASURED}) == []


def test_the_table_is_rendered_once_per_data_version(ci, client, settings, monkeypatch):
    """Page and API keep their table under the data's version (runs.read.freshness.cached):
    with the page cache off, a second reader gets the same table without its being made
    again, and a write to the run data makes it anew."""
    from runs.fidelity import views

    settings.PAGE_CACHE_SECONDS = 0
    made = []
    table = views._table
    monkeypatch.setattr(views, "_table", lambda source: made.append(source.slug) or table(source))
    pages = [client.get("/sources/liger-kernel-ci/fidelity/").content for _ in range(2)]
    apis = [client.get("/api/v1/sources/liger-kernel-ci/fidelity/").json() for _ in range(2)]
    assert made == ["liger-kernel-ci"] * 2  # once for the page, once for the API
    assert pages[0] == pages[1] and apis[0] == apis[1]
    assert len(apis[0]["rows"]) == len(TABLE["rows"])
    ci.description = "moved"
    ci.save()  # the runs app's tables move the data version
    client.get("/sources/liger-kernel-ci/fidelity/")
    assert made == ["liger-kernel-ci"] * 3

"""Browse and search at /runs/: every filter, free text, sorting, pagination, bad input."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from html import unescape
from urllib.parse import urlencode

import pytest

from runs.models import Evidence, Run
from tests.factories import BenchmarkFactory, GpuFactory, RunFactory, SourceFactory
from tests.pages import grow, queries, text_of


@pytest.fixture
def mixed(db):
    rope = BenchmarkFactory()
    norm = BenchmarkFactory(slug="rms_norm")
    a100 = GpuFactory(
        upstream_name="NVIDIA A100-SXM4-80GB",
        slug="nvidia-a100-sxm4-80gb",
        product="NVIDIA A100",
        form_factor="SXM4-80GB",
        architecture="sm_80",
    )
    ci = SourceFactory(slug="liger-kernel-ci", name="Liger-Kernel CI benchmarks")
    return {
        "rope_liger": RunFactory(benchmark=rope, provider="liger", median=1_000),
        "rope_hf": RunFactory(benchmark=rope, provider="huggingface", median=3_000),
        "norm_torch": RunFactory(benchmark=norm, provider="torch", median=2_000, gpu=a100),
        "rope_back": RunFactory(benchmark=rope, provider="liger", timed_pass="backward"),
        "ci": RunFactory(benchmark=rope, provider="liger", source=ci),
        "checked": RunFactory(benchmark=norm, provider="liger", evidence=Evidence.CHECKED),
    }


def ids(response) -> set[str]:
    return {r.public_id for r in response.context["page"].runs}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("benchmark=rms_norm", {"norm_torch", "checked"}),
        ("implementation=huggingface", {"rope_hf"}),
        ("gpu=nvidia-a100-sxm4-80gb", {"norm_torch"}),
        ("timed_pass=backward", {"rope_back"}),
        ("metric=memory", set()),
        ("dtype=bf16", {"rope_liger", "rope_hf", "norm_torch", "rope_back", "ci", "checked"}),
        ("dtype=fp32", set()),
        ("source=liger-kernel-ci", {"ci"}),
        ("evidence=checked", {"checked"}),
        ("q=rotary", {"rope_liger", "rope_hf", "rope_back", "ci"}),
        ("q=Transformers", {"rope_hf"}),
        ("q=rms&implementation=torch", {"norm_torch"}),
    ],
)
def test_filters(client, mixed, query, expected):
    response = client.get(f"/runs/?{query}")
    assert response.status_code == 200
    assert ids(response) == {mixed[name].public_id for name in expected}


def test_sorting_by_median(client, mixed):
    response = client.get("/runs/?benchmark=llama4_rope&timed_pass=forward&ordering=median")
    medians = [r.median for r in response.context["page"].runs]
    assert medians == sorted(medians) and len(medians) == 3
    response = client.get("/runs/?benchmark=llama4_rope&timed_pass=forward&ordering=-median")
    assert [r.median for r in response.context["page"].runs] == sorted(medians, reverse=True)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("evidence=bogus", "evidence"),
        ("timed_pass=sideways", "timed_pass"),
        ("ordering=price", "ordering"),
        ("metric=speed", "metric"),
    ],
)
def test_bad_filter_values_are_400_with_a_message(client, mixed, query, message):
    response = client.get(f"/runs/?{query}")
    assert response.status_code == 400
    assert "Some filters could not be used" in text_of(response)
    assert message in text_of(response)


def _follow(client, response, rel: str):
    link = re.search(rf'<a rel="{rel}" href="([^"]+)"', response.content.decode())
    return client.get("/runs/" + unescape(link.group(1))) if link else None


@pytest.mark.django_db
@pytest.mark.parametrize(
    "ordering", ["", "median", "-median", "observed", "rank", "-rank", "-imported"]
)
def test_cursor_pages_walk_every_run_once_both_ways(client, ordering):
    runs = RunFactory.create_batch(55)
    # Ties on the sort column and unranked runs: the id breaks ties, NULL ranks come last.
    Run.objects.filter(pk__in=[r.pk for r in runs[:30]]).update(median=500, rank=2)
    Run.objects.filter(pk__in=[r.pk for r in runs[50:]]).update(rank=None)
    first = client.get(f"/runs/?ordering={ordering}")
    assert len(first.context["page"].runs) == 50 and 'rel="prev"' not in first.content.decode()
    second = _follow(client, first, "next")
    assert second.status_code == 200 and len(second.context["page"].runs) == 5
    assert 'rel="next"' not in second.content.decode()
    assert ids(first) | ids(second) == {r.public_id for r in runs}
    back = _follow(client, second, "prev")
    assert [r.pk for r in back.context["page"].runs] == [r.pk for r in first.context["page"].runs]
    assert 'rel="prev"' not in back.content.decode()


@pytest.mark.django_db
def test_count_is_capped_and_labelled(client, monkeypatch):
    from runs.read import browse

    monkeypatch.setattr(browse, "COUNT_CAP", 3)
    RunFactory.create_batch(3)
    assert "3 runs match" in text_of(client.get("/runs/"))
    RunFactory()
    assert "More than 3 runs match" in text_of(client.get("/runs/"))


@pytest.mark.django_db
def test_malformed_cursor_is_400_with_a_message(client):
    from runs.read.browse import Cursor

    RunFactory.create_batch(2)
    other_sort = Cursor("median", 1, 1).encode()
    too_big = Cursor("-observed", datetime.now(UTC), 10**30).encode()
    for cursor in ["%%%", "bm90LWEtY3Vyc29y", "WyJtZWRpYW4iLCJ4IiwxLDBd", other_sort, too_big]:
        response = client.get(f"/runs/?cursor={cursor}")
        assert response.status_code == 400, cursor
        assert "cursor:" in text_of(response), cursor


@pytest.mark.django_db
def test_superseded_revisions_are_not_listed(client):
    run = RunFactory()
    Run.objects.filter(pk=run.pk).update(is_current=False)
    assert run.public_id not in ids(client.get("/runs/"))


@pytest.mark.django_db
def test_query_counts_do_not_grow(client, settings):
    """Unfiltered, filtered, sorted, searched and a second page: the same queries at 70 runs
    and at 580 (counting stops at the cap, pages start at their cursor)."""
    settings.PAGE_CACHE_SECONDS = 0
    urls = [
        "/runs/",
        "/runs/?benchmark=rms_norm&timed_pass=forward",
        "/runs/?benchmark=rms_norm&timed_pass=forward&ordering=median",
        "/runs/?q=rms",
        "/runs/?ordering=-rank",
    ]

    def counts() -> list[int]:
        # The second page of each, through the link the first page shows.
        second = [
            unescape(re.search(r'rel="next" href="\?([^"]+)"', client.get(u).content.decode())[1])
            for u in urls
        ]
        return [queries(client, u) for u in urls + [f"/runs/?{q}" for q in second]]

    RunFactory.create_batch(60)
    grow(120)  # 60 of them rms_norm: every list has a second page
    small = counts()
    grow(400)
    assert counts() == small


@pytest.mark.django_db
def test_count_is_kept_per_filters_and_moves_with_the_data(client, settings):
    """The count depends on the filters only: another sort or page of the same filters counts
    nothing, and a new run is counted at once."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.PAGE_CACHE_SECONDS = 0
    norm = BenchmarkFactory(slug="rms_norm")
    RunFactory.create_batch(3, benchmark=norm)
    RunFactory()  # another benchmark, not counted
    assert "3 runs match" in text_of(client.get("/runs/?benchmark=rms_norm"))
    with CaptureQueriesContext(connection) as ctx:
        resorted = client.get("/runs/?benchmark=rms_norm&ordering=-median")
    assert "3 runs match" in text_of(resorted)
    assert not [q for q in ctx.captured_queries if "COUNT(" in q["sql"]]
    RunFactory(benchmark=norm)
    assert "4 runs match" in text_of(client.get("/runs/?benchmark=rms_norm&ordering=-median"))


@pytest.mark.django_db
def test_rows_show_a_data_change_at_once(client, settings):
    """Each row is kept per data change: an update that bypasses save() (the data-version
    trigger alone) still shows on the next request."""
    settings.PAGE_CACHE_SECONDS = 0
    run = RunFactory(rank=1)
    assert "Reported" in text_of(client.get("/runs/"))
    Run.objects.filter(pk=run.pk).update(evidence=Evidence.CHECKED, rank=2)
    row = re.search(rf"<tr><td><a href=\"/runs/{run.public_id}/\">.*?</tr>",
                    client.get("/runs/").content.decode())[0]  # fmt: skip
    assert "Checked" in unescape(row) and '<td class="num">2</td>' in row


@pytest.mark.django_db
def test_filter_form_marks_exactly_the_chosen_options(client, mixed):
    """The selects are rendered once per data change and the chosen value marked per request:
    the marked option is the one whose value equals the parameter, hostile values mark none and
    come back escaped."""

    def selected(query: str) -> dict[str, list[str]]:
        html = client.get(f"/runs/?{query}").content.decode()
        marked: dict[str, list[str]] = {}
        for name, options in re.findall(r'<select name="(\w+)"[^>]*>(.*?)</select>', html, re.S):
            marked[name] = re.findall(r'<option value="([^"]*)" selected>', options)
        return marked

    chosen = selected(
        "benchmark=rms_norm&gpu=nvidia-a100-sxm4-80gb&source=liger-kernel-ci"
        "&timed_pass=backward&metric=latency&evidence=checked&ordering=-median"
    )
    assert chosen == {
        "benchmark": ["rms_norm"],
        "gpu": ["nvidia-a100-sxm4-80gb"],
        "source": ["liger-kernel-ci"],
        "timed_pass": ["backward"],
        "metric": ["latency"],
        "evidence": ["checked"],
        "ordering": ["-median"],
    }
    # Nothing chosen: the fixed-choice selects show their empty choice, the others none.
    assert selected("") == {
        "benchmark": [], "gpu": [], "source": [],
        "timed_pass": [""], "metric": [""], "evidence": [""], "ordering": [""],
    }  # fmt: skip
    hostile = '"><script>alert(1)</script>'
    query = urlencode({"benchmark": hostile, "gpu": "rms_norm"})
    assert "<script>alert" not in client.get(f"/runs/?{query}").content.decode()
    # An unknown value marks nothing; a benchmark's slug given as a GPU marks no GPU.
    assert selected(query)["benchmark"] == selected(query)["gpu"] == []


def test_a_filter_by_name_is_resolved_once_per_data_change(client, settings, db):
    """The ids a slug names are kept under the run data's version: browse asked again with the
    same filters reads its versions and its page only. A slug that names nothing is looked up
    every time (not kept), and one created later is found at once."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.PAGE_CACHE_SECONDS = 0
    run = RunFactory()
    url = f"/runs/?benchmark={run.benchmark.slug}&gpu={run.environment.gpu.slug}"
    client.get(url)
    with CaptureQueriesContext(connection) as ctx:
        assert run.public_id in client.get(url).content.decode()
    assert len(ctx) == 2  # the versions and the page's runs (the count is kept as well)
    for _ in range(2):
        with CaptureQueriesContext(connection) as ctx:
            client.get("/runs/?benchmark=not-yet")
        assert [q for q in ctx.captured_queries if "runs_benchmark" in q["sql"]]
    later = RunFactory(benchmark=BenchmarkFactory(slug="not-yet"))
    assert later.public_id in client.get("/runs/?benchmark=not-yet").content.decode()


def test_the_filter_form_reads_its_kept_options_once(client, settings, db, monkeypatch):
    """The three catalogue selects come from one lookup of what is kept for them, not one each
    (in the shared cache, once this process's copy of it has forgotten them)."""
    from runs.read import store

    settings.PAGE_CACHE_SECONDS = 0
    RunFactory()
    client.get("/runs/")
    store.clear_copy()
    looked_up: list[list[str]] = []
    real = store.cache.get_many

    def get_many(keys, *args, **kwargs):
        looked_up.append(list(keys))
        return real(keys, *args, **kwargs)

    monkeypatch.setattr(store.cache, "get_many", get_many)
    assert client.get("/runs/?benchmark=rms_norm").status_code == 200
    assert sum(":browse-options:" in key for keys in looked_up for key in keys) == 1

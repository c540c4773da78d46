"""Where the detected changes are shown: the run page's history chart, the source's changes
page, the benchmark page and the API, over an ingested synthetic history."""

from __future__ import annotations

import re

import pytest

from runs.changes.models import CellChange
from runs.models import Run
from runs.pages import history_chart
from runs.sources.pipeline import ingest
from tests.factories import RunFactory
from tests.pages import queries, text_of
from tests.synthetic_ci import BASE, commit, suite_cells, write_history

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(tmp_path, settings):
    settings.PAGE_CACHE_SECONDS = 0
    write_history(tmp_path, suite_cells())
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])


def _run(kernel: str, provider: str, at: int) -> Run:
    return Run.objects.public().get(
        benchmark__slug=kernel,
        implementation__provider_key=provider,
        publication__slug=commit(at),
    )


def _chart(html: str) -> str:
    return re.search(r"<svg[^>]*history-chart.*?</svg>", html, re.S).group(0)


def test_the_run_page_chart_labels_axes_commits_band_and_the_change(client, history):
    run = _run("own_kernel", "liger", 9)
    html = client.get(f"/runs/{run.public_id}/").content.decode()
    chart = _chart(html)
    assert "Latency median (ms)" in chart  # the y axis, with its unit
    assert re.findall(r'class="tick commit"[^>]*>([0-9a-f]{7})<', chart) == [
        commit(i) for i in range(12)
    ]
    assert 'class="tolerance-band"' in chart
    assert chart.count('class="change step regression"') == 1
    assert 'class="point rerun"' not in chart  # no controlled rerun of this run
    assert "axis from 0 to" in chart  # the desc gives the range
    text = text_of(client.get(f"/runs/{run.public_id}/"))
    assert "History of this cell across 12 publications of Liger-Kernel CI benchmarks" in text
    assert (
        f"At {commit(9)} (after {commit(8)}): regression , +100 %: from a median of 1.000 ms "
        "to 2.000 ms, beyond the threshold of 6 %." in text
    )
    assert "moved together" not in text  # its own move, not the host's


def test_a_grouped_change_says_it_was_likely_the_host(client, history):
    run = _run("suite_2", "torch", 8)
    text = text_of(client.get(f"/runs/{run.public_id}/"))
    assert (
        f"12 cells of 4 kernels moved together at {commit(8)}: likely the benchmark host, "
        "not the kernels." in text
    )


def test_an_outlier_and_a_noisy_cell_are_not_called_regressions(client, history):
    text = text_of(client.get(f"/runs/{_run('own_kernel', 'torch', 9).public_id}/"))
    assert "came back at the next: an outlier, not a regression" in text
    noisy = text_of(client.get(f"/runs/{_run('noisy_kernel', 'liger', 11).public_id}/"))
    history = noisy.split("History of this cell")[1].split("Protocol")[0]
    assert "Too noisy to judge" in history and "regression" not in history


def test_one_publication_says_so_per_source(client, settings):
    """A KernelBench-like source published once: no "CI runs" heading, no chart."""
    settings.PAGE_CACHE_SECONDS = 0
    run = RunFactory()
    text = text_of(client.get(f"/runs/{run.public_id}/"))
    assert "across upstream CI runs" not in text
    assert f"No history: {run.source.name} published this cell once." in text


def test_the_counts_agree_when_the_history_is_longer_than_shown(client, tmp_path, settings):
    settings.PAGE_CACHE_SECONDS = 0
    write_history(tmp_path, {("long_kernel", "liger"): [1.0] * 30})
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])
    text = text_of(client.get(f"/runs/{_run('long_kernel', 'liger', 15).public_id}/"))
    assert "24 of its 30 publications, those around this run" in text
    assert "All 30 publications of this cell" in text
    assert "across 30 publications of Liger-Kernel CI benchmarks" in text


def test_the_run_page_costs_the_same_with_and_without_changes(client, history):
    with_change = queries(client, f"/runs/{_run('own_kernel', 'liger', 9).public_id}/")
    grouped = queries(client, f"/runs/{_run('suite_1', 'liger', 8).public_id}/")
    without = queries(client, f"/runs/{_run('own_kernel', 'liger', 3).public_id}/")
    # The same whatever the changes: the size of a group a change moved with comes in the
    # changes' own query (CellChangeQuerySet.at_points).
    assert with_change == without
    assert grouped == with_change
    assert "12 cells of 4 kernels moved together" in text_of(
        client.get(f"/runs/{_run('suite_1', 'liger', 8).public_id}/")
    )


def test_a_controlled_rerun_is_drawn_in_its_own_mark():
    svg = history_chart.history_chart(
        chart_id="h", title="t", points=[("a", 100.0), ("b", 110.0), ("c", 105.0)], current=2,
        y_scale=1, y_unit="ns", y_label="Latency median",
        bands=[history_chart.Band(0, 1, 90.0, 110.0, "b")],
        marks=[history_chart.Mark(1, "step", "regression", 0.1)],
        rerun=history_chart.Rerun(90.0, "controlled rerun on NVIDIA H100"),
    )  # fmt: skip
    assert svg.count('class="point rerun"') == 1
    assert "Controlled rerun on NVIDIA H100: 90 ns." in svg
    assert "Baseline tested at b: 90 to 110 ns, over a to a." in svg


def test_the_source_changes_page_lists_regressions_first_and_groups(client, history):
    response = client.get("/sources/liger-kernel-ci/changes/")
    text = text_of(response)
    # Newest publication with changes first; at run 9 the kernel's own regression is listed
    # and the outlier counted; at run 8 the suite's shift is one grouped line.
    assert text.index(commit(9)) < text.index(commit(8))
    assert "Regressions (1) Own kernel" in text
    assert "1 point moved at 0000009 and came back at the next publication" in text
    assert f"12 cells of 4 kernels moved together at {commit(8)} (regression" in text
    assert "likely the benchmark host, not the kernels" in text
    source_page = client.get("/sources/liger-kernel-ci/").content.decode()
    assert 'href="/sources/liger-kernel-ci/changes/"' in source_page


def test_the_source_changes_page_costs_the_same_per_page(client, history, tmp_path):
    small = queries(client, "/sources/liger-kernel-ci/changes/")
    more = {(f"extra_{k}", "liger"): [1.0] * 8 + [2.0] * 4 for k in range(6)}
    write_history(tmp_path / "more", {**suite_cells(), **more})
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path / "more")])
    assert CellChange.objects.filter(benchmark__slug__startswith="extra_").count() == 6
    assert queries(client, "/sources/liger-kernel-ci/changes/") == small


def test_the_api_lists_and_filters_changes(client, history):
    body = client.get("/api/v1/changes/?source=liger-kernel-ci&kind=step&grouped=false").json()
    assert [(c["benchmark"], c["implementation"], c["publication"], c["direction"])
            for c in body["results"]] == [("own_kernel", "liger", commit(9), "regression")]  # fmt: skip
    change = body["results"][0]
    assert change["previous"] == commit(8) and change["unit"] == "ns"
    assert change["shift"] == pytest.approx(1.0)
    assert change["url"].endswith(f"/runs/{change['run']}/#history")
    grouped = client.get("/api/v1/changes/?grouped=true&benchmark=suite_0").json()["results"]
    assert len(grouped) == 3 and {c["kind"] for c in grouped} == {"step"}
    assert client.get("/api/v1/changes/?kind=step&direction=sideways").status_code == 400
    assert client.get("/api/v1/changes/?benchmarks=x").status_code == 400
    assert "/api/v1/changes/" in client.get("/api/v1/schema/").content.decode()


def test_the_benchmark_page_lists_its_changes(client, history):
    text = text_of(client.get("/benchmarks/suite_0/"))
    assert "Changes across upstream publications" in text
    assert "(with the host)" in text
    assert "Changes across upstream publications" not in text_of(
        client.get("/benchmarks/suite_0/?metric=memory")
    )


def test_choices_of_one_narrowing_share_the_changes_and_a_refused_one_keeps_none(
    client, history, monkeypatch
):
    """The changes depend on the source, GPU, pass and metric only: the page's two plots of one
    narrowing render them once, and show the same; a choice the page refuses (400) has them
    rendered but kept under no key its client chose."""
    from unittest.mock import Mock

    from runs.pages import views
    from runs.read import store

    rendered = Mock(wraps=views._benchmark_changes)
    monkeypatch.setattr(views, "_benchmark_changes", rendered)
    pages = [client.get(f"/benchmarks/suite_0/?plot={plot}") for plot in ("median", "speedup")]
    assert [p.status_code for p in pages] == [200, 200]
    shown = [text_of(p).split("Changes across upstream publications", 1)[1] for p in pages]
    assert shown[0] == shown[1] and rendered.call_count == 1
    kept = set(store.copy)
    refused = client.get("/benchmarks/suite_0/?gpu=nope")
    assert refused.status_code == 400 and rendered.call_count == 2
    assert not [key for key in set(store.copy) - kept if "benchmark-changes" in key]


def test_every_change_filter_has_an_index():
    """The API's filters (runs/changes/api.py) and the pages' reads, each on the leading column
    of an index of runs_cellchange."""
    from django.db import connection

    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "runs_cellchange")
    leading = {c["columns"][0] for c in constraints.values() if c["index"] or c["unique"]}
    filters = {"source_id", "benchmark_id", "publication_id", "kind", "direction", "grouped"}
    assert filters <= leading


def test_the_api_and_the_benchmark_include_cost_the_same_with_more_changes(
    client, history, tmp_path
):
    api = queries(client, "/api/v1/changes/?kind=step")
    bench = queries(client, "/benchmarks/suite_0/")
    more = {(f"suite_{k}", f"extra{p}"): [1.0] * 8 + [2.0] * 4 for k in range(4) for p in range(3)}
    write_history(tmp_path / "more", {**suite_cells(), **more})
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path / "more")])
    assert CellChange.objects.filter(provider_key__startswith="extra").count() == 12
    assert queries(client, "/api/v1/changes/?kind=step") == api
    assert queries(client, "/benchmarks/suite_0/") == bench


def test_the_changes_at_points_come_with_the_cells_status_even_when_there_are_none(history):
    """CellChangeQuerySet.at_points: the changes among the points and the cell's status, in
    one query; a cell without changes among them still gives its status."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    run = _run("own_kernel", "liger", 9)
    key = {"source_ids": {run.source_id}, "cell_key": run.group.cell_key,
           "provider_key": run.implementation.provider_key}  # fmt: skip
    publications = dict(
        Run.objects.history_of(run).values_list("publication__slug", "publication_id")
    )
    with CaptureQueriesContext(connection) as ctx:
        changes, status = CellChange.objects.at_points(**key, publication_ids=publications.values())
    assert len(ctx.captured_queries) == 1
    assert [(c.kind, c.direction, c.previous_slug) for c in changes] == [
        ("step", "regression", commit(8))
    ]
    assert changes[0].publication_id == publications[commit(9)] and status == "judged"
    before = [pk for slug, pk in publications.items() if slug != commit(9)]
    assert CellChange.objects.at_points(**key, publication_ids=before) == ([], "judged")
    other = {**key, "cell_key": "sha256:" + "0" * 64}
    assert CellChange.objects.at_points(**other, publication_ids=before) == ([], None)


def test_a_changes_page_reads_the_listed_rows_only_and_counts_the_rest(
    client, tmp_path, settings, monkeypatch
):
    """Each list of a publication shows its LISTED largest moves and counts the others; a
    group's size, kernels and median move are of the whole group, though only the listed rows
    are read as changes."""
    from runs.changes import pages

    settings.PAGE_CACHE_SECONDS = 0
    moves = [1.5 + 0.1 * i for i in range(12)]  # twelve cells, each its own move
    cells = {
        (f"suite_{i // 3}", ("liger", "torch", "huggingface")[i % 3]): BASE + [m] * 4
        for i, m in enumerate(moves)
    }
    write_history(tmp_path, cells)
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])
    group = CellChange.objects.filter(grouped=True, kind="step")
    assert group.count() == 12
    monkeypatch.setattr(pages, "LISTED", 5)
    read = []
    original = pages.shown

    def counting(changes):
        rows = original(changes)
        read.append(rows)
        return rows

    monkeypatch.setattr(pages, "shown", counting)
    text = text_of(client.get("/sources/liger-kernel-ci/changes/"))
    assert "12 cells of 4 kernels moved together" in text
    assert "And 7 more cells." in text
    shifts = sorted(c.shift for c in group)
    assert f"of the 12 beyond their thresholds {shifts[6] * 100:+.0f} %" in text
    (rows,) = read
    listed = sorted((c.shift for c in rows), reverse=True)
    # The five largest moves, and the median's row: six rows for twelve changes.
    assert listed[:5] == sorted(shifts, reverse=True)[:5] and len(listed) == 6


def test_the_changes_page_kept_asks_two_queries_and_cold_a_fixed_number(
    client, history, django_assert_max_num_queries
):
    """Kept (every reader after the first since a data change): the versions and the source.
    Cold: the same count with more publications, changes and cells (above), bounded here."""
    url = "/sources/liger-kernel-ci/changes/"
    assert queries(client, url) <= 10
    with django_assert_max_num_queries(2):
        assert client.get(url).status_code == 200


def test_the_changes_api_kept_asks_one_query_for_its_page(
    client, history, django_assert_max_num_queries
):
    url = "/api/v1/changes/?source=liger-kernel-ci"
    cold = queries(client, url)
    assert cold <= 6
    with django_assert_max_num_queries(cold - 1):  # the rows are kept: one query fewer
        body = client.get(url).json()
    assert body["results"] and all(r["source"] == "liger-kernel-ci" for r in body["results"])


def test_the_change_feeds_list_steps_newest_first_in_a_fixed_number_of_queries(client, history):
    run = _run("own_kernel", "liger", 9)
    urls = [
        "/feeds/sources/liger-kernel-ci/changes.atom",
        "/feeds/benchmarks/suite_0/changes.atom",
        f"/feeds/runs/{run.public_id}/changes.atom",
    ]
    counts = [queries(client, url) for url in urls]
    assert max(counts) <= 4
    feed = client.get(urls[2]).content.decode()
    assert feed.count("<entry>") == 1 and "Regression +100 %" in feed


def test_each_feed_and_page_order_has_an_index():
    """The feeds' filters followed by (published_at, id), the API's order, a cell's feed, the
    changes page's counts and its publications' order: each an index of its own table."""
    from django.db import connection

    def indexes(table):
        with connection.cursor() as cursor:
            found = connection.introspection.get_constraints(cursor, table)
        return [c["columns"] for c in found.values() if c["index"] or c["unique"]]

    changes = indexes("runs_cellchange")
    assert ["source_id", "kind", "published_at", "id"] in changes
    assert ["benchmark_id", "kind", "published_at", "id"] in changes
    assert ["published_at", "id"] in changes
    assert ["cell_key", "provider_key"] in changes
    assert ["source_id", "kind", "direction", "grouped"] in changes
    assert ["source_id", "published_at", "sequence", "id"] in indexes("runs_publication")
    assert ["source_id", "verdict"] in indexes("runs_judgedclaim")


def test_the_chart_band_is_the_tested_baseline_not_this_runs_median(client, history):
    """own_kernel, Liger: 1.0 for eight publications, then 1.0, 2.0, 2.0, 2.01; the step at
    run 9 was tested against the eight points before it (median 1.0 ms ± its threshold), so the
    band spans those points around 1 ms, not this run's 2 ms."""
    change = CellChange.objects.get(benchmark__slug="own_kernel", provider_key="liger")
    html = client.get(f"/runs/{_run('own_kernel', 'liger', 10).public_id}/").content.decode()
    chart = _chart(html)
    low, high = change.before * (1 - change.threshold), change.before * (1 + change.threshold)
    assert (
        f"Baseline tested at {commit(9)}: {low / 1e6:.4g} to {high / 1e6:.4g} ms, over "
        f"{commit(1)} to {commit(8)}." in chart
    )
    assert low < 1e6 < high < 2e6  # around the baseline, below this run's median
    (band,) = re.findall(r'<rect class="tolerance-band" x="([\d.]+)"[^>]*width="([\d.]+)"', chart)
    step = re.findall(r'class="change step regression"><line x1="([\d.]+)"', chart)[0]
    # The band ends half a slot before the change's line: the change point is outside it.
    assert float(band[0]) + float(band[1]) < float(step)

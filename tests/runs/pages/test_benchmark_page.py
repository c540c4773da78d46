"""Benchmark pages: a summary of the fastest implementation per GPU and pass, then one plot at a
time (GPU, pass, metric chosen by links), every implementation in it, speed-ups over a baseline
and the ranked table beneath; constant query count."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.models import Run
from tests.conftest import EXAMPLE_EXTERNAL_ID
from tests.factories import BenchmarkFactory, RunFactory, workload_for
from tests.pages import grow, queries, text_of


def _svgs(html: str) -> list[str]:
    return re.findall(r'<svg xmlns="http://www.w3.org/2000/svg" class="chart.*?</svg>', html, re.S)


# The seq sweep (the second workload of this GPU and pass; the first sweeps hidden).
H100_FORWARD = "?gpu=nvidia-h100-80gb-hbm3&pass=forward&metric=latency&workload=2"


def test_one_plot_with_every_implementation_speedups_and_the_table(client, liger_bench):
    """ "liger vs huggingface on my GPU": one plot, every implementation, the speed-up over the
    chosen baseline, the table beneath."""
    response = client.get("/benchmarks/llama4_rope/" + H100_FORWARD + "&baseline=huggingface")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<h1>Llama 4 rotary position embedding <small>llama4_rope</small></h1>" in html
    svgs = _svgs(html)
    assert len(svgs) == 1  # one plot at a time
    runs = Run.objects.public().filter(
        benchmark__slug="llama4_rope",
        timed_pass="forward",
        metric="latency",
        environment__gpu__slug="nvidia-h100-80gb-hbm3",
    )
    implementations = sorted(set(runs.values_list("implementation__display_name", flat=True)))
    header = re.search(r'<table class="panel-table">.*?<thead>(.*?)</thead>', html, re.S).group(1)
    assert re.findall(r'<th scope="col" class="num">(.*?)</th>', header) == implementations
    series = re.findall(r'<g class="series" data-series="([^"]+)"', svgs[0])
    assert series == implementations and len(series) >= 2
    assert re.search(r'<title id="plot-t">', svgs[0]) and "<desc" in svgs[0]
    assert "seq (log scale)" in svgs[0]  # upstream sweeps seq in powers of two
    # The table links every run with its rank, and the speed-up over the baseline.
    example = runs.get(external_id=EXAMPLE_EXTERNAL_ID)
    assert f'<a href="/runs/{example.public_id}/">385.5 µs</a> <span class="rank">#2</span>' in html
    assert '<span class="speedup">1.00×</span>' in html  # the baseline against itself
    text = text_of(response)
    assert "its speed-up over Transformers (higher is better)" in text
    # The summary: fastest implementation per GPU and pass, with its evidence level.
    assert "Fastest implementation per GPU and pass" in text
    assert 'class="badge evidence evidence-reported"' in html


def test_choices_are_links_that_keep_the_rest_of_the_state(client, liger_bench):
    html = client.get("/benchmarks/llama4_rope/" + H100_FORWARD + "&plot=speedup").content.decode()
    links = re.findall(r'<a href="\?([^"]+)"( aria-current="true")?', html)
    current = [q for q, cur in links if cur]
    # One current choice per row: source, GPU, pass, metric, baseline, plot.
    assert len(current) >= 6
    backward = [q for q, _ in links if "pass=backward" in q and "plot=speedup" in q]
    assert backward and all("gpu=nvidia-h100-80gb-hbm3" in q for q in backward)
    svg = _svgs(html)[0]
    assert "Speed-up over" in svg


def test_every_series_has_the_points_of_its_runs(client, liger_bench):
    html = client.get("/benchmarks/llama4_rope/" + H100_FORWARD).content.decode()
    svg = _svgs(html)[0]
    rows = re.findall(r"<tbody>(.*?)</tbody>", html.split('class="panel-table"')[1], re.S)[0]
    for group in re.findall(r'<g class="series".*?</g>', svg, re.S):
        name = re.search(r'data-series="([^"]+)"', group).group(1)
        path = re.search(r'<path d="([^"]+)"', group).group(1)
        assert path.startswith("M") and path.count("L") + 1 == rows.count("<tr>"), name


@pytest.mark.django_db
def test_a_choice_that_names_nothing_is_a_400_that_says_so(client):
    RunFactory(benchmark=BenchmarkFactory(slug="rms_norm"), rank=1)
    for query, message in [
        ("?gpu=nope", "Unknown gpu 'nope'"),
        ("?pass=sideways", "Unknown pass 'sideways'"),
        ("?baseline=%3Cscript%3E", "Unknown baseline '<script>'"),
        ("?workload=x", "workload is a number"),
        ("?plot=pie", "Unknown plot 'pie'"),
    ]:
        response = client.get("/benchmarks/rms_norm/" + query)
        assert response.status_code == 400, query
        assert message in text_of(response), query
        assert "'<script>'" not in response.content.decode()  # escaped, not echoed


@pytest.mark.django_db
def test_unknown_benchmark_is_404(client):
    assert client.get("/benchmarks/no_such_kernel/").status_code == 404


@pytest.mark.django_db
def test_benchmark_without_runs_says_so(client):
    BenchmarkFactory(slug="softmax")
    assert "No runs of this benchmark yet." in text_of(client.get("/benchmarks/softmax/"))


@pytest.mark.django_db
def test_benchmark_page_query_count_does_not_grow(client, settings):
    settings.PAGE_CACHE_SECONDS = 0
    bench = BenchmarkFactory(slug="rms_norm")
    for i in range(20):
        RunFactory(
            benchmark=bench,
            workload=workload_for(bench, M=4096, hidden=512 * (i // 2 + 1), dtype="bf16"),
            provider=["liger", "huggingface"][i % 2],
            sweep_name="hidden",
            sweep_value=512 * (i // 2 + 1),
            rank=i % 2 + 1,
        )
    small = queries(client, "/benchmarks/rms_norm/")
    chosen = queries(client, "/benchmarks/rms_norm/?plot=speedup&baseline=huggingface")
    grow(400, benchmark_slug="rms_norm")
    assert Run.objects.filter(benchmark=bench).count() >= 220
    assert queries(client, "/benchmarks/rms_norm/") == small
    assert queries(client, "/benchmarks/rms_norm/?plot=speedup&baseline=huggingface") == chosen


def test_kernel_names_that_are_not_slugs_have_pages(client, db):
    """Upstream CI names two kernels "dyt_beta=False" and "dyt_beta=True"."""
    from tests.factories import BenchmarkFactory, RunFactory

    run = RunFactory(benchmark=BenchmarkFactory(slug="dyt_beta=False"), rank=1)
    assert client.get("/").status_code == 200
    page = client.get(run.benchmark.get_absolute_url())
    assert page.status_code == 200
    assert "dyt_beta=False" in page.content.decode()
    assert client.get("/api/v1/benchmarks/dyt_beta=False/").status_code == 200


@pytest.mark.django_db
def test_tables_kept_per_data_change_show_a_change_at_once(client, settings):
    """The rendered tables are kept until the data changes, never longer: a run's new median
    is on the next page. A view asked for again reads the benchmark and the data version
    only: its detected changes are kept with the tables."""
    settings.PAGE_CACHE_SECONDS = 0
    bench = BenchmarkFactory(slug="rms_norm")
    run = RunFactory(benchmark=bench, rank=1, median=123_400)
    assert "123.4 µs" in text_of(client.get("/benchmarks/rms_norm/"))
    with CaptureQueriesContext(connection) as ctx:
        client.get("/benchmarks/rms_norm/")
    tables = {re.search(r'FROM "(\w+)"', q["sql"]).group(1) for q in ctx.captured_queries}
    assert tables == {"runs_version", "runs_benchmark"}
    Run.objects.filter(pk=run.pk).update(median=567_800)  # no signal: the database trigger
    text = text_of(client.get("/benchmarks/rms_norm/"))
    assert "567.8 µs" in text and "123.4 µs" not in text


def _judged(bench, gpu, publication, evidence: list[str]):
    for i, level in enumerate(evidence):
        RunFactory(benchmark=bench, gpu=gpu, publication=publication, source=publication.source,
                   workload=workload_for(bench, M=4096, hidden=512 * (i + 1), dtype="bf16"),
                   evidence=level)  # fmt: skip


@pytest.mark.django_db
def test_verdicts_of_two_gpu_products_side_by_side(client, settings):
    """The benchmark page counts each GPU product's rerun verdicts per publication (newest
    first) beside the runs it has, and asks the same queries however many are judged."""
    from tests.factories import GpuFactory, PublicationFactory, SourceFactory

    settings.PAGE_CACHE_SECONDS = 0
    bench = BenchmarkFactory(slug="rms_norm")
    source = SourceFactory()
    older = PublicationFactory(source=source, slug="02bac05",
                               published_at=datetime(2025, 7, 1, tzinfo=UTC))  # fmt: skip
    newer = PublicationFactory(source=source, slug="ab7fe2a",
                               published_at=datetime(2026, 3, 20, tzinfo=UTC))  # fmt: skip
    h100 = GpuFactory()
    h200 = GpuFactory(upstream_name="NVIDIA H200", slug="nvidia-h200", product="NVIDIA H200",
                      form_factor="", memory_gib=141, gpu_class="h200")  # fmt: skip
    _judged(bench, h200, older, ["reproduced", "not-reproduced", "checked", "reported"])
    _judged(bench, h100, newer, ["reproduced", "reproduced", "incorrect"])
    before = queries(client, "/benchmarks/rms_norm/")
    rows = re.findall(r"<tr>\s*<td>(NVIDIA [^<]+)</td><td>(\w+) .*?</td>((?:<td class=\"num\">\d+</td>\s*)+)</tr>",
                      client.get("/benchmarks/rms_norm/").content.decode(), re.S)  # fmt: skip
    counts = [(gpu, pub, re.findall(r">(\d+)<", cells)) for gpu, pub, cells in rows]
    # runs, reproduced, not reproduced, checked, incorrect, not rerun
    assert counts == [
        ("NVIDIA H100 80GB HBM3", "ab7fe2a", ["3", "2", "0", "0", "1", "0"]),
        ("NVIDIA H200", "02bac05", ["4", "1", "1", "1", "0", "1"]),
    ]
    _judged(bench, h100, older, ["checked"] * 5)
    assert queries(client, "/benchmarks/rms_norm/") == before


def test_the_kept_panels_hold_what_a_cell_shows_not_the_run_models(liger_bench):
    """Every choice of view unpickles the benchmark's kept panels: as models, the demo's
    fused_neighborhood_attention panels were 3.7 MB and took 132 ms a choice page. A cell keeps
    the fields the table, the summary and the chart read, and still links to its run."""
    import pickle

    from runs.models import Benchmark
    from runs.pages.benchmark import ShownRun
    from runs.pages.views import _benchmark_panels

    benchmark = Benchmark.objects.get(slug="llama4_rope")
    kept = pickle.loads(pickle.dumps(_benchmark_panels(benchmark)))
    cells = [
        run for panel in kept["panels"] for row in panel.cells.values() for run in row.values()
    ]
    assert len(cells) == Run.objects.public().filter(benchmark=benchmark).count()
    assert all(type(cell) is ShownRun for cell in cells)
    example = Run.objects.get(external_id=EXAMPLE_EXTERNAL_ID, is_current=True)
    shown = next(cell for cell in cells if cell.pk == example.pk)
    assert (shown.get_absolute_url(), shown.median, shown.rank) == (
        example.get_absolute_url(),
        example.median,
        example.rank,
    )

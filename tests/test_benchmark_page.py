"""Benchmark pages: one SVG plot per pass, metric, GPU and fixed parameters, one line per
implementation, with the ranked table beneath; constant query count."""

from __future__ import annotations

import re

import pytest

from runs.models import Run
from tests.conftest import EXAMPLE_EXTERNAL_ID
from tests.factories import BenchmarkFactory, RunFactory, workload_for
from tests.pages import grow, queries, text_of


def _panels(html: str) -> list[str]:
    return re.findall(r'<figure class="panel".*?</figure>', html, re.S)


def test_llama4_rope_page_plots_one_series_per_implementation(client, liger_bench):
    response = client.get("/benchmarks/llama4_rope/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<h1>All results for Llama 4 rotary position embedding</h1>" in html
    panels = _panels(html)
    runs = Run.objects.public().filter(benchmark__slug="llama4_rope")
    passes = set(runs.values_list("timed_pass", "metric"))
    assert len(panels) >= len(passes)
    for panel in panels:
        svg = re.search(r"<svg.*?</svg>", panel, re.S).group(0)
        header = re.search(r"<thead>(.*?)</thead>", panel, re.S).group(1)
        implementations = re.findall(r'<th scope="col" class="num">(.*?)</th>', header)
        series = re.findall(r'<g class="series" data-series="([^"]+)"', svg)
        assert series == implementations and len(series) >= 2
        assert re.search(r'<title id="p\d+-t">', svg) and "<desc" in svg
        assert 'class="axis-label"' in svg
    # The upstream sweep is over seq in powers of two: a log axis, labelled as such.
    assert "(log scale)" in html
    # The table beneath links every run with its rank.
    example = runs.get(external_id=EXAMPLE_EXTERNAL_ID)
    assert f'<a href="/runs/{example.public_id}/">385.5 µs</a> <span class="rank">#2</span>' in html


def test_each_series_has_the_points_of_its_runs(client, liger_bench):
    html = client.get("/benchmarks/llama4_rope/").content.decode()
    first = _panels(html)[0]
    svg = re.search(r"<svg.*?</svg>", first, re.S).group(0)
    rows = re.findall(r"<tbody>(.*?)</tbody>", first, re.S)[0].count("<tr>")
    for group in re.findall(r'<g class="series".*?</g>', svg, re.S):
        path = re.search(r'<path d="([^"]+)"', group).group(1)
        assert path.count("L") + 1 <= rows and path.startswith("M")


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
    grow(400, benchmark_slug="rms_norm")
    assert Run.objects.filter(benchmark=bench).count() >= 220
    assert queries(client, "/benchmarks/rms_norm/") == small


def test_kernel_names_that_are_not_slugs_have_pages(client, db):
    """Upstream CI names two kernels "dyt_beta=False" and "dyt_beta=True"."""
    from tests.factories import BenchmarkFactory, RunFactory

    run = RunFactory(benchmark=BenchmarkFactory(slug="dyt_beta=False"), rank=1)
    assert client.get("/").status_code == 200
    page = client.get(run.benchmark.get_absolute_url())
    assert page.status_code == 200
    assert "dyt_beta=False" in page.content.decode()
    assert client.get("/api/v1/benchmarks/dyt_beta=False/").status_code == 200

"""Benchmark pages cover every row the index holds for the benchmark: KernelBench problems (no
sweep), a Liger sweep whose x is text, and every GPU a CI source measured in any of its runs,
each from the newest publication that has it, saying which; a choice that had to change says
so in words."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runs.models import Benchmark, Run
from runs.sources.pipeline import ingest
from tests.conftest import KERNELBENCH, LIGER_CI, LIGER_CSV
from tests.pages import text_of

pytestmark = pytest.mark.django_db


def test_every_kernelbench_benchmark_page_answers_with_its_implementations(client):
    ingest(source_slug="kernelbench", locations=[str(KERNELBENCH)])
    slugs = list(Benchmark.objects.filter(runs__source__slug="kernelbench").distinct().values_list(
        "slug", flat=True
    ))  # fmt: skip
    assert len(slugs) == 250
    for slug in slugs:
        response = client.get(f"/benchmarks/{slug}/")
        assert response.status_code == 200, slug
    response = client.get("/benchmarks/kernelbench-l3-50-reluselfattention/")
    html = response.content.decode()
    assert 'class="chart bar-chart"' in html  # one workload: bars, not a line through a point
    runs = Run.objects.public().filter(benchmark__slug="kernelbench-l3-50-reluselfattention")
    for run in runs:
        assert f'href="/runs/{run.public_id}/"' in html
    assert "one workload" in text_of(response)


def _csv_with_text_x(tmp_path: Path) -> Path:
    lines = LIGER_CSV.read_text().splitlines()
    header, rows = lines[0], [line for line in lines[1:] if line.startswith("cross_entropy,")]
    sizes = sorted({row.split(",")[7] for row in rows}, key=float)[:3]
    words = {size: f"size-{chr(97 + i)}" for i, size in enumerate(sizes)}
    out = [header]
    for row in rows:
        cells = row.split(",")
        if cells[7] in words:
            cells[7] = words[cells[7]]
            out.append(",".join(cells))
    path = tmp_path / "all_benchmark_data.csv"
    path.write_text("\n".join(out) + "\n")
    return path


def test_a_sweep_whose_x_is_text_is_plotted_in_its_order(client, tmp_path):
    ingest(source_slug="liger-kernel-bench", locations=[str(_csv_with_text_x(tmp_path))])
    response = client.get("/benchmarks/cross_entropy/")
    assert response.status_code == 200
    html = response.content.decode()
    svg = re.search(r'<svg[^>]*class="chart line-chart".*?</svg>', html, re.S).group(0)
    ticks = re.findall(r'<text class="tick"[^>]*text-anchor="middle">([^<]+)</text>', svg)
    assert ticks == ["size-a", "size-b", "size-c"]
    assert re.findall(r'<th scope="row">([^<]+)</th>', html) == ["size-a", "size-b", "size-c"]


@pytest.fixture
def two_ci_runs(db):
    """Two CI runs of Liger on different GPUs: 02bac05 (H200, older) and 53a37a5 (A100)."""
    ingest(source_slug="liger-kernel-ci", locations=[str(LIGER_CI / "02bac05")])
    ingest(source_slug="liger-kernel-ci", locations=[str(LIGER_CI / "53a37a5")])


def test_every_gpu_of_every_ci_run_is_offered_from_its_newest_publication(client, two_ci_runs):
    runs = Run.objects.public().filter(benchmark__slug="rms_norm", source__slug="liger-kernel-ci")
    gpus = dict(runs.values_list("environment__gpu__slug", "publication__slug").distinct())
    assert len(gpus) == 2, gpus  # the two runs measured on two GPUs
    page = text_of(client.get("/benchmarks/rms_norm/"))
    for gpu, publication in gpus.items():
        response = client.get(f"/benchmarks/rms_norm/?source=liger-kernel-ci&gpu={gpu}")
        assert response.status_code == 200, gpu
        text = text_of(response)
        name = runs.filter(environment__gpu__slug=gpu).first().environment.gpu.upstream_name
        assert name in page  # offered on the default view
        assert f"latency, forward pass, {name}" in text
        assert f"From Liger-Kernel CI benchmarks publication {publication}" in text


def test_switching_source_keeps_what_applies_and_says_what_changed(client, two_ci_runs):
    ingest(source_slug="liger-kernel-bench", locations=[str(LIGER_CSV)])
    bench_gpus = set(
        Run.objects.public()
        .filter(benchmark__slug="rms_norm", source__slug="liger-kernel-bench")
        .values_list("environment__gpu__slug", flat=True)
    )
    assert "nvidia-h200" not in bench_gpus
    response = client.get(
        "/benchmarks/rms_norm/?source=liger-kernel-ci&gpu=nvidia-h200&pass=backward"
    )
    html = response.content.decode()
    link = re.search(r'<a href="\?(source=liger-kernel-bench[^"]*)">', html).group(1)
    assert "pass=backward" in link  # kept: the other source has a backward pass
    landed = text_of(client.get("/benchmarks/rms_norm/?" + link.replace("&amp;", "&")))
    assert "No NVIDIA H200 GPU in Liger-Kernel benchmarks for this choice; showing" in landed
    assert "nvidia-h200" not in landed  # words, not slugs
    assert "backward pass" in landed

"""Helpers shared by the page tests: text of a response, query counting, growing the data."""

from __future__ import annotations

import re
from html import unescape

from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import BenchmarkFactory, GpuFactory, RunFactory, workload_for


def text_of(response) -> str:
    html = response.content.decode()
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))


def queries(client, url: str) -> int:
    """Queries of one uncached GET (the caller sets PAGE_CACHE_SECONDS = 0)."""
    from runs.read import freshness

    freshness.reset()
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
    return len(ctx)


def grow(extra: int, benchmark_slug: str = "rms_norm") -> None:
    """Add runs in other groups and, half of them, in another benchmark: the database grows
    around the page under test, and so does the page itself where it lists them."""
    benchmarks = [BenchmarkFactory(slug=benchmark_slug), BenchmarkFactory()]
    gpu = GpuFactory()
    for i in range(extra):
        benchmark = benchmarks[i % 2]
        # A new workload every three runs, so groups multiply along with runs.
        workload = workload_for(benchmark, M=4096, hidden=256 * (i // 6 + 1), dtype="bf16")
        RunFactory(
            benchmark=benchmark,
            workload=workload,
            provider=["liger", "torch", "huggingface"][i % 3],
            gpu=gpu,
            rank=i % 3 + 1,
            sweep_name="hidden",
            sweep_value=256 * (i // 6 + 1),
        )

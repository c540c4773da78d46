"""A failed correctness check reads the other providers' accuracies of its cell in its
publication (EvidenceEvent.objects.reference_accuracies), on every rerun result that misses
its bound. The query finds the cell's runs through runs_run's (workload, publication) index,
on both databases, not through an index of one of the two (a publication's or a benchmark's
thousands of runs: 17 ms a query on SQLite over the demo data, 0.5 ms by the pair)."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.models import EvidenceEvent
from tests.factories import BenchmarkFactory, PublicationFactory, RunFactory, workload_for

INDEX = "run_workload_publication"


@pytest.fixture
def cell_run(db):
    """One run among 2 publications x 40 workloads x 2 providers of one benchmark: as in the
    demo data, a publication has many more runs than a cell of it."""
    benchmark = BenchmarkFactory()
    runs = [
        RunFactory(
            benchmark=benchmark,
            workload=workload_for(benchmark, seq=1024 * (w + 1), dtype="bf16"),
            provider=provider,
            publication=PublicationFactory(slug=f"commit-{p}"),
        )
        for p in range(2)
        for w in range(40)
        for provider in ("huggingface", "liger")
    ]
    return runs[0]


def _plan(sql: str) -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # What the indexes allow, not what a table of 120 rows favours.
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("ANALYZE runs_run")
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
            return json.dumps(cursor.fetchone()[0])
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
        return " ".join(str(row[-1]) for row in cursor.fetchall())


def test_the_reference_accuracies_read_the_workload_and_publication_index(cell_run):
    with CaptureQueriesContext(connection) as ctx:
        assert EvidenceEvent.objects.reference_accuracies(cell_run) == []
    (query,) = ctx.captured_queries
    assert INDEX in _plan(query["sql"])

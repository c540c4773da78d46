"""On PostgreSQL, the browse page's queries can be answered from runs_run's indexes: each sort's
first and later pages from that sort's index, the search from the foreign-key indexes. The
cheaper paths for a tiny table (a sequential scan; for sorts also a sort) are switched off, so
the plan shows what the indexes allow, not what 60 rows favour; bench/explain.py shows the
plans the planner picks on a full database."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.http import QueryDict

from runs.read.browse import browse
from tests.factories import BenchmarkFactory, RunFactory

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL plans"),
]

SORT_INDEXES = {
    "": "run_observed_id",  # the default, newest observed first
    "median": "run_median_id",
    "-median": "run_median_id",
    "observed": "run_observed_id",
    "rank": "run_rank_id",
    "-rank": "run_rank_id",
    "imported": "run_created_id",
    "-imported": "run_created_id",
}
SEARCH_INDEXES = {
    "run_bench_observed",
    "run_bench_median",
    "run_implementation",
    "run_environment",
    "run_workload_publication",
}


def _in_order(scans: list[tuple[str, str | None]]) -> set[str | None]:
    """The indexes a plan reads rows from in index order (with or without the heap: the page
    query loads only the id and the sort key, which an index-only scan can answer)."""
    if all(node in ("Index Scan", "Index Only Scan") for node, _ in scans):
        return {index for _, index in scans}
    return set()


def _scans(queryset, *, off=("seqscan",)) -> list[tuple[str, str | None]]:
    """(node type, index name) of every node of the plan that reads runs_run or its indexes."""
    with connection.cursor() as cursor:
        for setting in off:
            cursor.execute(f"SET LOCAL enable_{setting} = off")
        cursor.execute("ANALYZE runs_run")
    plan = json.loads(queryset.explain(format="json"))[0]["Plan"]
    found, stack = [], [plan]
    while stack:
        node = stack.pop()
        if node.get("Relation Name") == "runs_run" or node.get("Index Name", "").startswith("run_"):
            found.append((node["Node Type"], node.get("Index Name")))
        stack.extend(node.get("Plans", []))
    return found


@pytest.fixture
def runs(db):
    return RunFactory.create_batch(60)


@pytest.mark.parametrize(("ordering", "index"), sorted(SORT_INDEXES.items()))
def test_each_sort_reads_its_index_on_every_page(runs, ordering, index):
    """In order, without sorting: the page reads 51 entries of the index, from its cursor on."""
    off = ("seqscan", "sort", "bitmapscan")
    first = browse(QueryDict(f"ordering={ordering}"))
    assert _in_order(_scans(first.page_queryset(), off=off)) == {index}
    cursor = first.page().next.encode()
    later = browse(QueryDict(f"ordering={ordering}&cursor={cursor}"))
    assert _in_order(_scans(later.page_queryset(), off=off)) == {index}


@pytest.mark.parametrize(
    ("ordering", "index"), [("", "run_bench_observed"), ("median", "run_bench_median")]
)
def test_a_benchmark_sorted_reads_its_own_index(runs, ordering, index):
    """With a second filter too: the page walks that benchmark's runs in order, not every
    run in that order (half of them another benchmark's here)."""
    RunFactory.create_batch(60, benchmark=BenchmarkFactory(slug="rms_norm", title="RMSNorm"))
    off = ("seqscan", "sort", "bitmapscan")
    query = f"benchmark=llama4_rope&gpu=nvidia-h100-80gb-hbm3&ordering={ordering}"
    first = browse(QueryDict(query))
    assert _in_order(_scans(first.page_queryset(), off=off)) == {index}
    later = browse(QueryDict(f"{query}&cursor={first.page().next.encode()}"))
    assert _in_order(_scans(later.page_queryset(), off=off)) == {index}


def test_search_reads_the_foreign_key_indexes(runs):
    """The count, which has no sort index to walk: it must find the few matches through the
    indexes of the catalogue columns the text resolved to."""
    RunFactory.create_batch(3, benchmark=BenchmarkFactory(slug="rms_norm", title="RMSNorm"))
    searched = browse(QueryDict("q=rmsnorm"))
    assert searched.count_queryset().count() == 3
    scans = _scans(searched.count_queryset())
    assert scans and all(node != "Seq Scan" for node, _ in scans)
    assert {index for _, index in scans if index} <= SEARCH_INDEXES

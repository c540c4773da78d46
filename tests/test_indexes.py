"""Every browse/API filter and sort lands on an indexed column of runs_run (checked against
the real schema, whatever the backend)."""

from __future__ import annotations

import pytest
from django.db import connection

from runs.read.filters import ORDERINGS

# Filter -> the runs_run column it reaches (text filters resolve against catalogue tables first
# and arrive as IN (...) on a foreign key; see runs/read/filters.py).
FILTER_COLUMNS = {
    "benchmark": "benchmark_id",
    "implementation": "implementation_id",
    "gpu": "environment_id",
    "timed_pass": "timed_pass",
    "metric": "metric",
    "dtype": "workload_id",
    "source": "source_id",
    "evidence": "evidence",
    "q": "benchmark_id",  # and implementation_id
    "lookup by external id": "source_id",  # (source_id, external_id)
    "current revisions": "public_id",
}


def _leading_columns() -> set[str]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "runs_run")
    return {c["columns"][0] for c in constraints.values() if c["index"] or c["unique"]}


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "column"), sorted(FILTER_COLUMNS.items()))
def test_filter_column_is_indexed(name, column):
    assert column in _leading_columns(), f"{name} filters on {column}, which has no index"


@pytest.mark.django_db
@pytest.mark.parametrize("column", sorted(ORDERINGS.values()))
def test_sort_column_is_indexed(column):
    assert column in _leading_columns()

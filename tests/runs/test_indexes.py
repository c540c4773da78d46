"""runs_run's indexes, checked against the real schema whatever the backend: every browse/API
filter and sort has one, each sort's ends in the unique tie-breaker keyset pages need, no index
repeats another's leading columns, and the database has exactly what Run.Meta declares."""

from __future__ import annotations

import pytest
from django.db import connection

from runs.models import Run
from runs.read.filters import ORDERINGS

# Filter -> the runs_run columns it reaches (text filters resolve against catalogue tables first
# and arrive as IN (...) on a foreign key; see runs/read/filters.py).
FILTER_COLUMNS = {
    "benchmark": ["benchmark_id"],
    "implementation": ["implementation_id"],
    "gpu": ["environment_id"],
    "timed_pass": ["timed_pass"],
    "metric": ["metric"],
    "dtype": ["workload_id"],
    "source": ["source_id"],
    "evidence": ["evidence"],
    "q": ["benchmark_id", "implementation_id", "environment_id", "workload_id"],
    "lookup by external id": ["source_id"],  # (source_id, external_id)
    "current revisions": ["public_id"],
    "ranking, benchmark page": ["publication_id"],
    "group page": ["group_id"],
}


def _indexes() -> dict[str, dict]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "runs_run")
    return {
        name: c
        for name, c in constraints.items()
        if c["index"] or c["unique"] or c["primary_key"]
        if not c["foreign_key"] and not c["check"]
    }


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "columns"), sorted(FILTER_COLUMNS.items()))
def test_filter_column_is_indexed(name, columns):
    leading = {c["columns"][0] for c in _indexes().values()}
    assert set(columns) <= leading, f"{name} filters on {columns}, not all indexed"


@pytest.mark.django_db
@pytest.mark.parametrize("column", sorted(ORDERINGS.values()))
def test_sort_has_an_index_ending_in_the_id(column):
    """Keyset pages continue from (value, id): the index must order ties by id too."""
    assert any(c["columns"] == [column, "id"] for c in _indexes().values())


@pytest.mark.django_db
def test_no_index_repeats_the_leading_columns_of_another():
    """An index whose columns start another index serves nothing the longer one does not (a
    unique one still enforces its rule, so it may be the shorter)."""
    indexes = _indexes()
    redundant = [
        (name, other)
        for name, c in indexes.items()
        for other, d in indexes.items()
        if name != other and not c["unique"] and d["columns"][: len(c["columns"])] == c["columns"]
    ]
    assert redundant == []


@pytest.mark.django_db
def test_database_has_exactly_the_declared_indexes():
    """What Run.Meta declares and nothing else: an index added by db_index or a foreign key
    behind the model's back, or a constraint a migration dropped by accident, shows here."""
    declared = {i.name for i in Run._meta.indexes} | {c.name for c in Run._meta.constraints}
    found = {name for name, c in _indexes().items() if not c["primary_key"]}
    assert found == declared

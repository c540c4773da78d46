"""On PostgreSQL a query its connection has run a few times is prepared once and then only
executed (kernelindex/settings.py): a page's handful of queries is not parsed and planned on
every request. DB_PREPARED_STATEMENTS=0 turns it off for a pooler that cannot keep them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from runs.models import Run

ROOT = Path(__file__).resolve().parents[2]


def _prepared(fragment: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            [f"%{fragment}%"],
        )
        return cursor.fetchone()[0]


@pytest.mark.services
def test_a_query_run_a_few_times_is_prepared_on_its_connection(services):
    # A query of a shape no other test asks, so the connection the suite shares has not
    # prepared it yet.
    where = '"runs_run"."revision" > $2'
    assert _prepared(where) == 0
    # Different values, one statement: the values travel apart from the query text.
    for public_id in ("00000001", "00000002", "00000003", "00000004", "00000005", "00000006"):
        runs = Run.objects.filter(public_id=public_id, revision__gt=0)
        assert list(runs.values_list("evidence", flat=True)) == []
    assert _prepared(where) == 1


def _database_options(**env) -> dict:
    code = "from kernelindex import settings; import json; "
    code += "print(json.dumps(settings.DATABASES['default'].get('OPTIONS', {})))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout)


def test_the_switch_and_sqlite_leave_the_driver_alone():
    postgres = "postgres://postgres@127.0.0.1:5432/any"
    on = _database_options(DATABASE_URL=postgres, DB_PREPARED_STATEMENTS="1")
    assert on == {"server_side_binding": True, "prepare_threshold": 5}
    assert _database_options(DATABASE_URL=postgres, DB_PREPARED_STATEMENTS="0") == {}
    assert _database_options(DATABASE_URL="sqlite:///x.sqlite3") == {}

"""The home and GPU pages' counts, kept by the write side: database triggers on runs_run (current
revisions) and runs_comparisongroup (every group) add each write's difference to runs_tally
(models.Tally: one row per benchmark, environment and source) in the write's own transaction,
so the counts move exactly when the runs do and are read as a few hundred rows at any size.
On PostgreSQL a trigger runs once per statement over its transition tables (a COPY of 2,000
runs adds one grouped difference, not 2,000 row updates); on SQLite once per row. A TRUNCATE
zeroes the column. `install` (after every migrate) recreates the triggers and recounts every
tally under the triggers' lock, so a restored database starts right.

What pays for them: bench/layers.py at 1,001,692 runs (02220a5c, 2026-12-06;
docs/performance.md, "What each read-side layer buys"): the home page's counts read from the
tallies in 1.48 ms, against 151.2 ms counting the runs and groups.
"""

from __future__ import annotations

from django.db import connections, transaction

from runs.models import ComparisonGroup, Run, Tally

TRIGGER = "ki_tally"
KEY = "benchmark_id, environment_id, source_id"


def _tables() -> dict[str, tuple[str, str, str]]:
    """{table: (the column it counts, the rows counted, the row's source)}, SQL of a row {t}."""
    source = "(SELECT source_id FROM runs_publication WHERE id = {t}.publication_id)"
    # A group whose publication is already gone names no source: only a flush deletes in that
    # order (PostgreSQL's foreign keys refuse it), and it empties the tallies.
    return {
        Run._meta.db_table: ("runs", "{t}.is_current", "{t}.source_id"),
        ComparisonGroup._meta.db_table: ("groups", f"{source} IS NOT NULL", source),
    }


def _add(table: str, rows: list[tuple[str, int]], per_row: bool = False) -> str:
    """SQL that adds to the tallies the grouped count of `rows`, (table, sign) pairs: the
    tables' rows, or with per_row the row NEW or OLD itself."""
    column, where, source = _tables()[table]

    def select(name: str, sign: int) -> str:
        t, rows_from = (name, "") if per_row else ("t", f"FROM {name} AS t")
        return (
            f"SELECT {t}.benchmark_id, {t}.environment_id, {source.format(t=t)} AS source_id, "
            f"{sign} AS d {rows_from} WHERE {where.format(t=t)}"
        )

    union = " UNION ALL ".join(select(name, sign) for name, sign in rows)
    counts = "SUM(d), 0" if column == "runs" else "0, SUM(d)"
    tally = Tally._meta.db_table
    return (
        f"INSERT INTO {tally} ({KEY}, runs, groups) SELECT {KEY}, {counts} FROM ({union}) AS x "
        f"GROUP BY {KEY} HAVING SUM(d) <> 0 "
        f"ON CONFLICT ({KEY}) DO UPDATE SET {column} = {tally}.{column} + EXCLUDED.{column};"
    )


def install(using: str = "default", **kwargs) -> None:
    """(Re)create the tally triggers and recount every tally, in one transaction: the
    triggers' lock holds writes back until the recount is committed with them."""
    connection = connections[using]
    postgresql = connection.vendor == "postgresql"
    tables = _tables()
    if not postgresql and connection.vendor != "sqlite":
        return
    if not {Tally._meta.db_table, *tables} <= set(connection.introspection.table_names()):
        return
    with transaction.atomic(using=using), connection.cursor() as cursor:
        for table, (column, _, _) in tables.items():
            for event, old, new in (("insert", 0, 1), ("update", 1, 1), ("delete", 1, 0)):
                if postgresql:  # once per statement, over its transition tables
                    rows = [("old_rows", -1)] * old + [("new_rows", 1)] * new
                    tables_as = "OLD TABLE AS old_rows " * old + "NEW TABLE AS new_rows" * new
                    body = _add(table, rows)
                    _create_postgresql(cursor, table, event, body, f"REFERENCING {tables_as}")
                    continue
                name = f"{TRIGGER}_{table}_{event}"
                body = _add(table, [("OLD", -1)] * old + [("NEW", 1)] * new, per_row=True)
                cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
                cursor.execute(f"CREATE TRIGGER {name} AFTER {event} ON {table} BEGIN {body} END")
            if postgresql:
                zero = f"UPDATE {Tally._meta.db_table} SET {column} = 0;"
                _create_postgresql(cursor, table, "truncate", zero, "")
        cursor.execute(f"DELETE FROM {Tally._meta.db_table}")
        for table in tables:
            cursor.execute(_add(table, [(table, 1)]))


def _create_postgresql(cursor, table: str, event: str, body: str, referencing: str) -> None:
    function = f"{TRIGGER}_{table}_{event}"
    cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}_{event} ON {table}")
    cursor.execute(
        f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ "
        f"BEGIN {body} RETURN NULL; END $$"
    )
    cursor.execute(
        f"CREATE TRIGGER {TRIGGER}_{event} AFTER {event.upper()} ON {table} {referencing} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()"
    )


def uninstall(apps=None, schema_editor=None) -> None:
    """Drop the tally triggers (a migration back past the tally table's)."""
    connection = schema_editor.connection if schema_editor else connections["default"]
    with connection.cursor() as cursor:
        for table in _tables():
            for event in ("insert", "update", "delete", "truncate"):
                if connection.vendor == "postgresql":
                    cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}_{event} ON {table}")
                    cursor.execute(f"DROP FUNCTION IF EXISTS {TRIGGER}_{table}_{event}()")
                else:
                    cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}_{table}_{event}")

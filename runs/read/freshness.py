"""When a page goes stale. The rule: a database trigger moves a version on every write, in the
writing transaction, however the write is made (save(), update(), bulk_create, COPY, raw SQL);
a page, and each value kept for one, is keyed by the versions it reads (and the origin its links
are built from), so nothing is served once a write to what it read has committed. Who keeps
what, and the figures that pay for it: docs/read-side.md.

    scope               moved by a write to
    data                any table of the runs app (ingest, evidence, changes, claims)
    run:<public id>     a row of another public app that names that run, directly or through
                        its parent row (attestations, reports, rerun jobs, their receipts)
    activity:<app>      any row of that app
    activity:unscoped   a row of another public app that names no run, or a TRUNCATE of one

    page                                        reads
    run page /runs/<id>/                        data, run:<id>, activity:unscoped
    benchmark page                              data, and what its panels declare
    every other public page and API endpoint    data
"""

from __future__ import annotations

import contextvars
import hashlib
import uuid
from contextlib import contextmanager
from datetime import UTC, datetime

from django.apps import apps
from django.db import DatabaseError, connections

from kilib.origin import site_root
from runs.models import Version
from runs.read import store

DATA = "data"
UNSCOPED = "activity:unscoped"
EVERY_OTHER_PAGE = (DATA,)
KEPT_SECONDS = 3600  # how long a kept value may sit unread; never served under other versions


def run_scope(public_id: str) -> str:
    return f"run:{public_id}"


def activity_of(app_label: str) -> str:
    return f"activity:{app_label}"


def run_page(public_id: str) -> tuple[str, ...]:
    return (DATA, run_scope(public_id), UNSCOPED)


def benchmark_page(panel_reads=()) -> tuple[str, ...]:
    return (DATA, *panel_reads)


# Test databases roll back while the cache keeps its entries, so a version can come back with
# other rows behind it: reset() gives every key a new salt. In production versions only grow.
_salt = [""]
_reading: contextvars.ContextVar = contextvars.ContextVar("versions", default=None)


class Versions:
    """{scope: (value, when it last moved)}, their key, and when the newest moved. `writing`:
    inside a transaction that wrote run data, the number of its latest such statement."""

    def __init__(self, rows: dict[str, tuple[int, datetime | None]], writing: str = ""):
        self.rows = rows
        self.writing = writing if DATA in rows else ""
        # The time beside the value: a version table restored or rebuilt starts its values again.
        raw = ";".join(
            f"{s}={v}@{t.timestamp() if t else 0:.6f}" for s, (v, t) in sorted(rows.items())
        )
        raw += f";writing={self.writing}" if self.writing else ""
        self.key = hashlib.sha256((_salt[0] + raw).encode()).hexdigest()[:32]
        self.last = max((t for _, t in rows.values() if t), default=None)


def current(scopes) -> Versions:
    """The versions of `scopes` now: from the request's own read where it has them all
    (page_cache.public_page reads its page's versions once), else one query."""
    scopes = tuple(sorted(set(scopes)))
    known = _reading.get()
    if known is not None and all(s in known.rows for s in scopes):
        return Versions({s: known.rows[s] for s in scopes}, known.writing)
    rows, writing = _read(scopes)
    found = {scope: (value, at) for scope, value, at in rows}
    return Versions({s: found.get(s, (0, None)) for s in scopes}, writing)


@contextmanager
def request_versions(versions: Versions):
    """Inside, current() answers from the versions the request already read."""
    token = _reading.set(versions)
    try:
        yield
    finally:
        _reading.reset(token)


def _read(scopes: tuple[str, ...]) -> tuple[list[tuple], str]:
    # A request's versions are its first query, so they double as the connection's health
    # check (CONN_HEALTH_CHECKS would send a SELECT 1 first, a second round trip on every
    # request): a reused connection that fails here is closed and asked again on a new one.
    connection = connections["default"]
    if (
        connection.connection is None
        or not connection.health_check_enabled
        or connection.health_check_done
        or connection.in_atomic_block
    ):
        return _select(connection, scopes)
    connection.health_check_done = True
    try:
        return _select(connection, scopes)
    except DatabaseError:
        connection.close()
        return _select(connection, scopes)


def _select(connection, scopes: tuple[str, ...]) -> tuple[list[tuple], str]:
    # Plain SQL on the primary key, without the ORM's query building (a third of a cached
    # page's time in process); PostgreSQL gives the time as seconds, no time-zone lookup a row,
    # and the run-data statement this transaction last made (WRITING), in the same round trip.
    table = connection.ops.quote_name(Version._meta.db_table)
    postgresql = connection.vendor == "postgresql"
    at = "extract(epoch FROM changed_at)::float8" if postgresql else "changed_at"
    writing = f"current_setting('{WRITING}', true)" if postgresql else "''"
    with connection.cursor() as cursor:
        marks = ", ".join(["%s"] * len(scopes))
        cursor.execute(
            f"SELECT scope, value, {at}, {writing} FROM {table} WHERE scope IN ({marks})", scopes
        )
        rows = cursor.fetchall()
    if postgresql:
        times = [datetime.fromtimestamp(t, UTC) if t is not None else None for _, _, t, _ in rows]
    else:
        converter = connection.ops.convert_datetimefield_value  # text in SQLite
        times = [converter(t, None, connection) if t else None for _, _, t, _ in rows]
    # A transaction that wrote run data sees the `data` row it moved, so a row is there.
    writing = (rows[0][3] or "") if rows else ""
    return [(s, v, t) for (s, v, _, _), t in zip(rows, times, strict=True)], writing


def run_activity(public_id: str) -> int:
    """How many writes have named this run (0: its panels need ask for nothing)."""
    return current([run_scope(public_id)]).rows[run_scope(public_id)][0]


_MISSING = object()


def cached(name: str, scopes, compute, *, keep=None, shared: bool = True):
    """compute(), kept under the versions of `scopes` (what it reads) in store.py: for the
    parts of a page that cost more than the rest of it. `keep(value)` says whether a value is
    worth keeping (not an error page, whose key a client can vary at will); `shared=False` keeps
    it in this process's copy only (store.put_many says for which).

    What pays for it: bench/layers.py at 1,001,692 runs (02220a5c, 2026-12-06, in process,
    page cache off; docs/performance.md, "What each read-side layer buys"): with every part
    computed instead, the home page takes 48.6 ms instead of 2.6, the benchmark page 319
    instead of 4.6, the changes page 398 instead of 7.1, browse 62.7 instead of 18.8."""
    full = cached_key(name, scopes)
    value = store.get(full, _MISSING, shared=shared)
    if value is _MISSING:
        value = compute()
        if keep is None or keep(value):
            store.put(full, value, KEPT_SECONDS, shared=shared)
    return value


def cached_key(name: str, scopes) -> str:
    return f"kept:{name}:{_under(scopes)}"


def cached_many(kind: str, ids, scopes, build) -> dict:
    """{id: part} for each id's `kind` part, kept like cached(); `build(missing ids)` makes the
    parts not kept in one go, so a listing of fifty costs at most one round trip to the shared
    cache and one query more."""
    under = _under(scopes)
    keys = {pk: f"kept:{kind}:{pk}:{under}" for pk in ids}
    found = store.get_many(keys.values())
    parts = {pk: found[key] for pk, key in keys.items() if key in found}
    if missing := [pk for pk in keys if pk not in parts]:
        built = build(missing)
        store.put_many({keys[pk]: part for pk, part in built.items()}, KEPT_SECONDS)
        parts.update(built)
    return parts


def _under(scopes) -> str:
    # A kept value may hold absolute links, and under DEBUG without SITE_ROOT they follow the
    # address each request came to (kilib/origin.py): one host's links never reach another.
    return f"{current(scopes).key}:{hashlib.sha256(site_root().encode()).hexdigest()[:12]}"


def reset() -> None:
    """A new salt for every key (tests whose database rolled back its versions)."""
    _salt[0] = uuid.uuid4().hex
    store.clear_copy()


# The triggers ----------------------------------------------------------------------------

TRIGGER = "ki_version"
# On PostgreSQL a statement on the run data moves the `data` row once a transaction: each
# update of one row in a transaction leaves a row version that every later update walks (a
# demo folder of 2,741 results wrote it several times a result; docs/performance.md, "Demo load").
# Inside the transaction each such statement counts itself in WRITING, a setting that lives
# until the transaction (or the savepoint) ends: a value kept there is keyed by the statement
# it followed (and by the transaction's own time, as every key), and never read outside it.
WRITING = "kernelindex.data_writing"
SQLITE_NOW = "strftime('%Y-%m-%d %H:%M:%f','now')"


def versioned_models() -> list:
    """The models whose writes move a version: those of the apps whose rows appear on public
    pages (`public_data = True` on their AppConfig) but their `private_models` (read by no
    public page, or written on every request)."""
    return [
        model
        for config in apps.get_app_configs()
        if getattr(config, "public_data", False)
        for model in config.get_models(include_auto_created=True)
        if model._meta.managed
        and not model._meta.proxy
        and model._meta.model_name not in getattr(config, "private_models", ())
    ]


def run_paths(model, row: str) -> list[str]:
    """SQL for the id of the run a row of `model` names: its `run` column, else the `run` column
    of each parent row it points at (a receipt's job). [] for a row that names no run."""
    run_model = apps.get_model("runs", "Run")

    def run_field(m):
        fields = m._meta.concrete_fields
        return next((f for f in fields if f.name == "run" and f.related_model is run_model), None)

    if (direct := run_field(model)) is not None:
        return [f"{row}.{direct.column}"]
    paths = []
    for f in model._meta.concrete_fields:
        parent = f.related_model if f.is_relation and f.related_model is not model else None
        if parent is not None and (inner := run_field(parent)) is not None:
            table, pk = parent._meta.db_table, parent._meta.pk.column
            paths.append(f"(SELECT {inner.column} FROM {table} WHERE {pk} = {row}.{f.column})")
    return paths


def _bump(now: str, scope: str = "", run: str = "") -> str:
    """Move `scope`, or the version of the run whose id is `run` (SQL)."""
    v = Version._meta.db_table
    if run:
        runs = apps.get_model("runs", "Run")._meta.db_table
        rows = f"SELECT 'run:' || public_id, 1, {now} FROM {runs} WHERE id = {run}"
    else:
        rows = f"VALUES ('{scope}', 1, {now})"
    return (
        f"INSERT INTO {v} (scope, value, changed_at) {rows} "
        f"ON CONFLICT (scope) DO UPDATE SET value = {v}.value + 1, changed_at = {now};"
    )


def _moves(model, now: str, row: str = "") -> str:
    """What a write to `model` moves: the run data (the runs app's tables); else for a row
    (NEW, OLD) its runs' versions, for a statement what every run page reads; and its app's."""
    app = model._meta.app_label
    if app == "runs":
        return _bump(now, DATA)
    runs = "".join(_bump(now, run=p) for p in run_paths(model, row)) if row else ""
    return (runs or _bump(now, UNSCOPED)) + _bump(now, activity_of(app))


def triggers_install(using: str = "default", **kwargs) -> None:
    """(Re)create the triggers on every public table (post_migrate, so a table any migration
    adds is covered), and give each run that already has activity its version, so the pages
    that skip the activity queries of a run at version 0 skip only runs with none."""
    connection = connections[using]
    existing = set(connection.introspection.table_names())
    if Version._meta.db_table not in existing or connection.vendor not in ("postgresql", "sqlite"):
        return
    models = [m for m in versioned_models() if m._meta.db_table in existing]
    postgresql = connection.vendor == "postgresql"
    now = "now()" if postgresql else SQLITE_NOW
    with connection.cursor() as cursor:
        for model in models:
            per_row = model._meta.app_label != "runs" and bool(run_paths(model, "x"))
            (_install_postgresql if postgresql else _install_sqlite)(cursor, model, per_row)
            if per_row:
                _seed(cursor, model, now)


def _install_postgresql(cursor, model, per_row: bool) -> None:
    table = model._meta.db_table
    for suffix in ("", "_row", "_truncate"):
        cursor.execute(f'DROP TRIGGER IF EXISTS {TRIGGER}{suffix} ON "{table}"')
    function = f"{TRIGGER}_{table}"[:60]
    # Per statement where a row names no run: a COPY of 2,000 runs moves the data once.
    moves = _moves(model, "now()")
    if model._meta.app_label == "runs":  # the row once a transaction, WRITING every statement
        written = f"coalesce(nullif(current_setting('{WRITING}', true), ''), '0')::bigint"
        moves = (
            f"IF {written} = 0 THEN {moves} END IF; "
            f"PERFORM set_config('{WRITING}', ({written} + 1)::text, true);"
        )
    cursor.execute(
        f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"{moves} RETURN NULL; END $$"
    )
    after = "AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE"
    if per_row:  # each row names its own run; a TRUNCATE names none
        cursor.execute(
            f"CREATE OR REPLACE FUNCTION {function}_r() RETURNS trigger LANGUAGE plpgsql AS $$ "
            f"BEGIN IF TG_OP <> 'DELETE' THEN {_moves(model, 'now()', 'NEW')} END IF; "
            f"IF TG_OP <> 'INSERT' THEN {_moves(model, 'now()', 'OLD')} END IF; "
            f"RETURN NULL; END $$"
        )
        cursor.execute(
            f'CREATE TRIGGER {TRIGGER}_row AFTER INSERT OR UPDATE OR DELETE ON "{table}" '
            f"FOR EACH ROW EXECUTE FUNCTION {function}_r()"
        )
        after = "AFTER TRUNCATE"
    suffix = "_truncate" if per_row else ""
    cursor.execute(
        f'CREATE TRIGGER {TRIGGER}{suffix} {after} ON "{table}" '
        f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()"
    )


def _install_sqlite(cursor, model, per_row: bool) -> None:
    for op, written in {"INSERT": ["NEW"], "UPDATE": ["NEW", "OLD"], "DELETE": ["OLD"]}.items():
        name = f'"{TRIGGER}_{model._meta.db_table}_{op.lower()}"'
        cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
        rows = written if per_row else [""]
        body = "".join(_moves(model, SQLITE_NOW, row) for row in rows)
        cursor.execute(
            f'CREATE TRIGGER {name} AFTER {op} ON "{model._meta.db_table}" BEGIN {body} END'
        )


def _seed(cursor, model, now: str) -> None:
    v, runs = Version._meta.db_table, apps.get_model("runs", "Run")._meta.db_table
    for path in run_paths(model, "t"):
        cursor.execute(
            f"INSERT INTO {v} (scope, value, changed_at) SELECT DISTINCT 'run:' || r.public_id, "
            f'1, {now} FROM "{model._meta.db_table}" AS t JOIN {runs} AS r ON r.id = {path} '
            f"WHERE 1 = 1 ON CONFLICT (scope) DO NOTHING"
        )

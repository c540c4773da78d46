"""When a page goes stale: the versions each page reads, and the writes that move them.

A version is a row of runs.models.Version, moved by a database trigger in the transaction of
the write itself (save(), update(), bulk_create, COPY, raw SQL alike): no write path can forget
it, and the new value becomes visible exactly when the write commits.

    scope               moved by a write to
    ------------------  ------------------------------------------------------------------
    data                any table of the runs app: runs, groups, documents, publications,
                        the ledger, evidence events, changes, claims (ingest and evidence)
    run:<public id>     a row of another public app that names that run, directly or
                        through its parent row: attestations, reports and their moderation,
                        rerun jobs (a claim, a heartbeat), their receipts and rejected results
    activity:<app>      any row of that app (every run:<id> write moves its app's too)
    activity:unscoped   a row of another public app that names no run (poster bans), or a
                        TRUNCATE of one

    page                                        reads
    ------------------------------------------  ---------------------------------------------
    run page /runs/<id>/                         data, run:<id>, activity:unscoped
    benchmark page                               data, and what its panels declare
                                                 (attestations: activity:attestations)
    every other public page: home, browse, group, source, ledger, GPU, the feeds, the API,
    changes, claims, a run's history, compare and manifest                 data

So an attestation on run A retires A's page and the benchmark pages, a job claim or heartbeat
on A retires A's page only, neither run B's page, the home page or browse; an ingest or an
evidence change retires every page.

Who keeps a page, and for how long it can be older than the data:
- the server's page cache (anonymous GETs, runs/read/page_cache.py) and the values kept for
  a page (kept() below: a run page's rendered sections and panels, the home page's rendered
  totals...) are keyed by the versions they read, in the shared cache and in each process's
  copy of it (store.py): an entry is never served once one of those versions has moved. Old
  entries are never read again and age out. Every key also names the origin the absolute
  links are built from (kilib/origin.py): under DEBUG without SITE_ROOT it is the
  address each request came to, and one host's links must never reach another.
- signed-in readers are never served a stored page; their ETag is the content's own.
- browsers and proxies get `Cache-Control: no-cache` with an ETag made of the same versions:
  they may keep a copy but ask before each use, and the answer is a 304 when nothing the page
  reads has moved. So no write leaves a stale page anywhere once it has committed (for an
  anonymous reader: at once).
Each request reads the versions of its page once: one query on the primary key (0.26 ms on
PostgreSQL), which every page pays, cached or not, so nothing can serve a page older than a
committed write.
"""

from __future__ import annotations

import contextvars
import hashlib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property

from django.apps import apps
from django.db import DatabaseError, connections

from kilib.origin import site_root
from runs.models import Version
from runs.read import store

DATA = "data"
UNSCOPED = "activity:unscoped"
# How long a kept value may sit unread in the cache; never served under other versions.
KEPT_SECONDS = 3600


def run_scope(public_id: str) -> str:
    return f"run:{public_id}"


def activity_of(app_label: str) -> str:
    """Any write to that app's public tables: for a part that sums up an app's rows across
    runs (a benchmark page's measured reproductions), declared by the app that renders it."""
    return f"activity:{app_label}"


def run_page(public_id: str) -> tuple[str, ...]:
    """What a run page reads: the run data, this run's activity (its panels) and the
    community writes that name no run."""
    return (DATA, run_scope(public_id), UNSCOPED)


def benchmark_page(panel_reads=()) -> tuple[str, ...]:
    """What a benchmark page reads: the run data, and what its panels declare they read."""
    return (DATA, *panel_reads)


EVERY_OTHER_PAGE = (DATA,)


# Reading versions ------------------------------------------------------------------------


@dataclass(frozen=True)
class Versions:
    values: dict[str, int]
    times: dict[str, datetime | None]  # when each last moved
    key: str = field(default="")

    @cached_property
    def last(self) -> datetime | None:
        """When the newest of them moved (a page's Last-Modified)."""
        known = [at for at in self.times.values() if at is not None]
        return max(known) if known else None

    def of(self, scopes) -> Versions:
        values = {s: self.values[s] for s in scopes}
        times = {s: self.times[s] for s in scopes}
        return Versions(values, times, _key(values, times))


# Test databases roll back while the cache keeps its entries, so a version value can come
# back with other rows behind it; reset() gives the process a new namespace. Never moved in
# production, where versions only grow.
_namespace = {"salt": ""}
_reading: contextvars.ContextVar[Versions | None] = contextvars.ContextVar("versions", default=None)


def current(scopes) -> Versions:
    """The versions of these scopes now: from the request's own read where it read them all
    (page_cache.public_page reads a page's versions once), else one query."""
    scopes = tuple(sorted(set(scopes)))
    known = _reading.get()
    if known is not None and all(s in known.values for s in scopes):
        return known.of(scopes)
    found = {scope: (value, at) for scope, value, at in _read(scopes)}
    values = {s: found.get(s, (0, None))[0] for s in scopes}
    times = {s: found.get(s, (0, None))[1] for s in scopes}
    return Versions(values, times, _key(values, times))


def _read(scopes: tuple[str, ...]) -> list[tuple]:
    """The versions' rows. A page's versions are its request's first query, so they double as
    the connection's health check (with CONN_HEALTH_CHECKS Django would send a SELECT 1
    before it, a second round trip on every request, cached page or not): a reused connection
    that fails here is closed and the query asked once more, on a new one."""
    connection = connections["default"]
    check = (
        connection.connection is not None
        and connection.health_check_enabled
        and not connection.health_check_done
        and not connection.in_atomic_block
    )
    if not check:
        return _select(connection, scopes)
    connection.health_check_done = True
    try:
        return _select(connection, scopes)
    except DatabaseError:
        connection.close()
        return _select(connection, scopes)


def _select(connection, scopes: tuple[str, ...]) -> list[tuple]:
    # Every request asks this, cached page or not: plain SQL on the primary key, without the
    # ORM's query building (a third of a cached page's time in process). PostgreSQL gives the
    # change time as seconds: no time-zone lookup per row.
    table = connection.ops.quote_name(Version._meta.db_table)
    marks = ", ".join(["%s"] * len(scopes))
    postgresql = connection.vendor == "postgresql"
    at = "extract(epoch FROM changed_at)::float8" if postgresql else "changed_at"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT scope, value, {at} FROM {table} WHERE scope IN ({marks})", scopes)
        rows = cursor.fetchall()
    if postgresql:
        return [
            (s, v, datetime.fromtimestamp(t, UTC) if t is not None else None) for s, v, t in rows
        ]
    converter = connection.ops.convert_datetimefield_value  # text in SQLite
    return [(s, v, converter(t, None, connection) if t else None) for s, v, t in rows]


def _key(values: dict[str, int], times: dict[str, datetime | None]) -> str:
    # The time beside the value: a version table restored or rebuilt starts its values again.
    raw = ";".join(
        f"{s}={v}@{times[s].timestamp() if times[s] else 0:.6f}" for s, v in sorted(values.items())
    )
    return hashlib.sha256((_namespace["salt"] + raw).encode()).hexdigest()[:32]


@contextmanager
def request_versions(versions: Versions) -> Iterator[Versions]:
    """`with request_versions(versions):` lets kept() in the view reuse the versions its
    request already read."""
    token = _reading.set(versions)
    try:
        yield versions
    finally:
        _reading.reset(token)


def run_activity(public_id: str) -> int:
    """How many writes have named this run (0: it has no attestation, report or job at all,
    so its panels need not ask for any)."""
    return current([run_scope(public_id)]).values[run_scope(public_id)]


_MISSING = object()


def kept(name: str, scopes, compute, *, keep=None, shared: bool = True):
    """compute(), kept under the versions of `scopes` (what compute reads) in the shared cache
    and this process's copy of it (store.py): for the parts of a page that cost more than the
    rest of it (the home page's counts, a benchmark page's tables). `keep` decides which
    values are worth keeping (not error pages, whose keys a client can vary at will). A cache
    outage computes every time. `shared=False` keeps the value in this process's copy only
    (store.put_many says for which values).

    What kept values buy (bench/layers.py at 1,001,692 runs, 02220a5c, 2026-12-06, in
    process, page cache off): with every part computed instead, the home page takes 48.6 ms
    instead of 2.6, the benchmark page 319 instead of 4.6, the changes page 398 instead of
    7.1, browse 62.7 instead of 18.8."""
    full = kept_key(name, scopes)
    value = store.get(full, _MISSING, shared=shared)
    if value is _MISSING:
        value = compute()
        if keep is None or keep(value):
            store.put(full, value, KEPT_SECONDS, shared=shared)
    return value


def kept_key(name: str, scopes) -> str:
    """The key kept() stores `name` under for the current versions and origin."""
    return f"kept:{name}:{current(scopes).key}:{_origin()}"


def kept_many(kind: str, ids, scopes, build) -> dict:
    """{id: part} for each id's `kind` part (a listing's table row, a run as the API lists it),
    kept under the versions of `scopes` like kept(). `build(missing ids)` makes those not
    kept, all in one go, so a page of fifty costs at most one round trip to the shared cache
    and one query more, however many of its parts were missing."""
    version = f"{current(scopes).key}:{_origin()}"
    keys = {pk: f"kept:{kind}:{pk}:{version}" for pk in ids}
    found = store.get_many(keys.values())
    parts = {pk: found[key] for pk, key in keys.items() if key in found}
    missing = [pk for pk in keys if pk not in parts]
    if missing:
        built = build(missing)
        store.put_many({keys[pk]: part for pk, part in built.items()}, KEPT_SECONDS)
        parts.update(built)
    return parts


def _origin() -> str:
    # A kept value may hold absolute links (the API's urls, a feed, a run page's commands),
    # and under DEBUG without SITE_ROOT they follow the address each request came to: a value
    # is kept per origin, so one host's links are never served to another. With SITE_ROOT it
    # is the one origin, and this adds nothing to tell apart.
    return hashlib.sha256(site_root().encode()).hexdigest()[:12]


def reset() -> None:
    """A new namespace for every key (tests whose database rolled back its versions)."""
    _namespace["salt"] = uuid.uuid4().hex
    store.clear_copy()


# The triggers ----------------------------------------------------------------------------

TRIGGER = "ki_version"


# Each app declares on its AppConfig whether its rows appear on public pages
# (`public_data = True`) and which of its models no public page reads or that change on every
# request (`private_models`, model names): runs names no other app (imports run one way).
def public_data_apps() -> frozenset[str]:
    """Labels of the apps whose rows appear on public pages."""
    return frozenset(c.label for c in apps.get_app_configs() if getattr(c, "public_data", False))


def private_models() -> frozenset[str]:
    """The "app.model" labels of the public apps' models that must not move a version."""
    return frozenset(
        f"{config.label}.{name}"
        for config in apps.get_app_configs()
        if getattr(config, "public_data", False)
        for name in getattr(config, "private_models", ())
    )


def public_models() -> list:
    """Every model of the public apps (many-to-many tables too), less the private ones."""
    private = private_models()
    return [
        model
        for label in sorted(public_data_apps())
        for model in apps.get_app_config(label).get_models(include_auto_created=True)
        if model._meta.managed and not model._meta.proxy and model._meta.label_lower not in private
    ]


def run_paths(model, row: str) -> list[str]:
    """SQL for the id of the run a row of `model` names: its `run` column, else the `run`
    column of each parent row it points at (a receipt's job, a moderation event's
    attestation). [] for a row that names no run."""
    run_model = apps.get_model("runs", "Run")

    def run_field(m):
        return next(
            (
                f
                for f in m._meta.concrete_fields
                if f.name == "run" and f.related_model is run_model
            ),
            None,
        )

    direct = run_field(model)
    if direct is not None:
        return [f"{row}.{direct.column}"]
    paths = []
    for f in model._meta.concrete_fields:
        parent = f.related_model if f.is_relation else None
        inner = run_field(parent) if parent is not None and parent is not model else None
        if inner is not None:
            table, pk = parent._meta.db_table, parent._meta.pk.column
            paths.append(f"(SELECT {inner.column} FROM {table} WHERE {pk} = {row}.{f.column})")
    return paths


def _scope_for(model) -> str:
    if model._meta.app_label == "runs":
        return DATA
    return "run" if run_paths(model, "x") else UNSCOPED


def _bump(now: str, scope: str) -> str:
    v = Version._meta.db_table
    return (
        f"INSERT INTO {v} (scope, value, changed_at) VALUES ('{scope}', 1, {now}) "
        f"ON CONFLICT (scope) DO UPDATE SET value = {v}.value + 1, changed_at = {now};"
    )


def _bump_run(now: str, run_id: str) -> str:
    v, runs = Version._meta.db_table, apps.get_model("runs", "Run")._meta.db_table
    return (
        f"INSERT INTO {v} (scope, value, changed_at) SELECT 'run:' || public_id, 1, {now} "
        f"FROM {runs} WHERE id = {run_id} "
        f"ON CONFLICT (scope) DO UPDATE SET value = {v}.value + 1, changed_at = {now};"
    )


def _row_sql(model, now: str, row: str) -> str:
    """What one written row moves: its runs' versions and its app's activity."""
    runs = "".join(_bump_run(now, p) for p in run_paths(model, row))
    return runs + _bump(now, activity_of(model._meta.app_label))


def _statement_sql(model, now: str) -> str:
    """What a write that names no one run moves: the run data (runs' tables), or what every
    run page reads and the app's activity (other apps' tables, and a TRUNCATE of any)."""
    if model._meta.app_label == "runs":
        return _bump(now, DATA)
    return _bump(now, UNSCOPED) + _bump(now, activity_of(model._meta.app_label))


def triggers_install(using: str = "default", **kwargs) -> None:
    """(Re)create the triggers that move the versions on any write to a public table, and give
    every run that already has activity its version. Run after every migrate (post_migrate),
    so a table added by any app's migration is covered."""
    connection = connections[using]
    existing = set(connection.introspection.table_names())
    if Version._meta.db_table not in existing or connection.vendor not in ("postgresql", "sqlite"):
        return
    models = [m for m in public_models() if m._meta.db_table in existing]
    install = _install_postgresql if connection.vendor == "postgresql" else _install_sqlite
    with connection.cursor() as cursor:
        for model in models:
            install(cursor, connection, model)
        _seed(cursor, connection, models)
        if connection.vendor == "postgresql":
            _drop_notify(cursor, connection)


def _install_postgresql(cursor, connection, model) -> None:
    table = model._meta.db_table
    quoted = connection.ops.quote_name(table)
    for suffix in ("", "_row", "_truncate"):
        cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}{suffix} ON {quoted}")
    function = f"{TRIGGER}_{table}"[:60]
    # Per statement: a COPY of 2,000 runs moves the version once, not 2,000 times.
    cursor.execute(
        f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"{_statement_sql(model, 'now()')} RETURN NULL; END $$"
    )
    if _scope_for(model) != "run":
        cursor.execute(
            f"CREATE TRIGGER {TRIGGER} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {quoted} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()"
        )
        return
    # Per row: each row names its own run. A TRUNCATE names none: it moves what every run reads.
    cursor.execute(
        f"CREATE OR REPLACE FUNCTION {function}_r() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF TG_OP <> 'DELETE' THEN {_row_sql(model, 'now()', 'NEW')} END IF; "
        f"IF TG_OP <> 'INSERT' THEN {_row_sql(model, 'now()', 'OLD')} END IF; "
        f"RETURN NULL; END $$"
    )
    cursor.execute(
        f"CREATE TRIGGER {TRIGGER}_row AFTER INSERT OR UPDATE OR DELETE ON {quoted} "
        f"FOR EACH ROW EXECUTE FUNCTION {function}_r()"
    )
    cursor.execute(
        f"CREATE TRIGGER {TRIGGER}_truncate AFTER TRUNCATE ON {quoted} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()"
    )


def _drop_notify(cursor, connection) -> None:
    """Databases migrated by an earlier release also told listening processes of each moved
    version (NOTIFY); nothing listens any more."""
    quoted = connection.ops.quote_name(Version._meta.db_table)
    for suffix in ("_row", "_reset"):
        cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}_notify{suffix} ON {quoted}")
    cursor.execute(f"DROP FUNCTION IF EXISTS {Version._meta.db_table}_notify()")


SQLITE_NOW = "strftime('%Y-%m-%d %H:%M:%f','now')"


def _install_sqlite(cursor, connection, model) -> None:
    table = model._meta.db_table
    for op in ("INSERT", "UPDATE", "DELETE"):
        name = connection.ops.quote_name(f"{TRIGGER}_{table}_{op.lower()}")
        cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
        if _scope_for(model) == "run":
            rows = {"INSERT": ["NEW"], "UPDATE": ["NEW", "OLD"], "DELETE": ["OLD"]}[op]
            body = "".join(_row_sql(model, SQLITE_NOW, row) for row in rows)
        else:
            body = _statement_sql(model, SQLITE_NOW)
        cursor.execute(
            f"CREATE TRIGGER {name} AFTER {op} ON {connection.ops.quote_name(table)} "
            f"BEGIN {body} END"
        )


def _seed(cursor, connection, models) -> None:
    """Runs with activity from before these triggers existed get version 1, so the pages
    that skip the activity queries for a run at version 0 skip only runs with none."""
    v, runs = Version._meta.db_table, apps.get_model("runs", "Run")._meta.db_table
    now = "now()" if connection.vendor == "postgresql" else SQLITE_NOW
    for model in models:
        if _scope_for(model) != "run":
            continue
        for path in run_paths(model, "t"):
            cursor.execute(
                f"INSERT INTO {v} (scope, value, changed_at) "
                f"SELECT DISTINCT 'run:' || r.public_id, 1, {now} "
                f"FROM {connection.ops.quote_name(model._meta.db_table)} AS t "
                f"JOIN {runs} AS r ON r.id = {path} WHERE 1 = 1 ON CONFLICT (scope) DO NOTHING"
            )

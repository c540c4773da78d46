"""The versions PostgreSQL pushes to each web process as they commit, so that an anonymous
page answered from the page cache asks the database nothing.

Every write to runs_version (freshness.py's triggers move it in the writing transaction) also
sends `NOTIFY ki_versions, '<scope> <value> <epoch>'`. PostgreSQL delivers a notification
only when its transaction commits, in commit order, to every connection that LISTENs. Each
process keeps one such connection, in a thread, and a copy of the versions it has been told
about or has read since; `current()` answers from that copy while the connection is up.

Why this cannot serve a page older than its data for longer than a notification takes:
- A version is copied from a read of the table only if that read began after LISTEN took
  effect, so every commit that read did not see is still on its way; notifications
  overwrite in commit order, so the copy ends at the last committed value.
- A read never overwrites what a notification put there (it could be older than it).
- When the connection drops, the copy is dropped with it and every request reads the table
  until a new LISTEN is up: nothing missed in between is ever served.
So the copy lags a commit by the notification's trip (bench/pushed_versions.py measures it). Only anonymous readers use it (page_cache.public_page): a signed-in reader or a worker,
the only ones who write, always read the table, so nobody misses their own write.

On SQLite, with KERNELINDEX_PUSHED_VERSIONS=0, and in the test suite (whose transactions never
commit), there is no copy: every request reads the table, one primary-key query.
"""

from __future__ import annotations

import logging
import os
import threading
from datetime import UTC, datetime

from django.conf import settings
from django.db import connections

logger = logging.getLogger(__name__)

CHANNEL = "ki_versions"
RESET = "*"  # the payload sent when versions can go back (runs_version emptied)
# Bounds the copy; dropping it is always safe (the next requests read the table again).
MAX_SCOPES = 100_000
RETRY_SECONDS = 2.0
MAX_RETRY_SECONDS = 60.0
# A quiet connection is checked this often, and the kernel's keepalives give up on a silent
# peer within about as long again: the longest a dead server's copy could be believed.
IDLE_CHECK_SECONDS = 10.0


def parse(payload: str) -> tuple[str, int, datetime | None]:
    scope, value, epoch = payload.rsplit(" ", 2)
    at = datetime.fromtimestamp(float(epoch), UTC) if epoch != "" else None
    return scope, int(value), at


class Copy:
    """The versions a process has been told about: notifications overwrite, reads only fill
    gaps, and a lost connection empties it (see the module's docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.values: dict[str, tuple[int, datetime | None]] = {}
        self.live = False
        self.generation = 0
        self.changes = 0  # moves with every change to `values` (changes())

    def up(self) -> None:
        """LISTEN has taken effect: from now on a read of the table can be kept."""
        with self.lock:
            self._forget()
            self.live = True

    def down(self) -> None:
        with self.lock:
            self._forget()
            self.live = False

    def told(self, payload: str) -> None:
        with self.lock:
            if payload == RESET or len(self.values) >= MAX_SCOPES:
                self._forget()
            if payload != RESET:
                scope, value, at = parse(payload)
                self.values[scope] = (value, at)
            self.changes += 1

    def _forget(self) -> None:
        """Empty the copy, and keep no read that began before (caller holds the lock)."""
        self.values.clear()
        self.generation += 1
        self.changes += 1

    def lookup(self, scopes, read) -> dict[str, tuple[int, datetime | None]] | None:
        """{scope: (value, changed_at)} for these scopes, or None when no LISTEN is up.
        `read(missing scopes)` gives the table's rows for those the copy lacks."""
        with self.lock:
            if not self.live:
                return None
            generation = self.generation
            found = {s: self.values[s] for s in scopes if s in self.values}
        missing = [s for s in scopes if s not in found]
        if missing:
            rows = {scope: (value, at) for scope, value, at in read(tuple(missing))}
            fetched = {s: rows.get(s, (0, None)) for s in missing}
            with self.lock:
                # A notification that came in meanwhile is newer than this read: keep it. A
                # generation that moved means notifications may have been missed: keep nothing.
                if self.live and self.generation == generation:
                    for scope, version in fetched.items():
                        self.values.setdefault(scope, version)
                    self.changes += 1
            found.update(fetched)
        return found


_copy = Copy()
_started = {"pid": None}
_start_lock = threading.Lock()
_listener = {"backend": None, "stop": threading.Event()}


def lookup(scopes, read):
    """The process's copy of these versions (None: read the table). Starts the listening
    thread on the first call in each process (gunicorn forks workers after import)."""
    if not enabled():
        return None
    pid = os.getpid()
    if _started["pid"] != pid:
        with _start_lock:
            if _started["pid"] != pid:
                _started["pid"] = pid
                _copy.down()  # a forked child inherits its parent's copy but not its thread
                _listener["stop"] = threading.Event()
                threading.Thread(
                    target=_listen, args=(_listener["stop"],), name="ki-versions", daemon=True
                ).start()
    return _copy.lookup(scopes, read)


def changes() -> int | None:
    """A number that moves whenever this process's copy does, None while it has none: what was
    worked out from the copy's versions (freshness.current) stands while the number does."""
    if _started["pid"] != os.getpid() or not _copy.live or not enabled():
        return None
    return _copy.changes


def enabled() -> bool:
    return (
        getattr(settings, "PUSHED_VERSIONS", False)
        and connections["default"].vendor == "postgresql"
    )


def connection_params() -> dict:
    """The default database's connection settings, as psycopg.connect takes them."""
    params = connections["default"].get_connection_params()
    keep = (
        "dbname",
        "user",
        "password",
        "host",
        "port",
        "sslmode",
        "sslrootcert",
        "sslcert",
        "sslkey",
        "passfile",
        "service",
        "options",
    )
    return {k: v for k, v in params.items() if k in keep and v not in (None, "")}


def _connect():
    import psycopg

    return psycopg.connect(
        autocommit=True,
        application_name="kernelindex-versions",
        connect_timeout=5,
        keepalives=1,
        keepalives_idle=int(IDLE_CHECK_SECONDS),
        keepalives_interval=2,
        keepalives_count=3,
        **connection_params(),
    )


def _listen(stop: threading.Event) -> None:
    wait = RETRY_SECONDS
    while not stop.is_set():
        try:
            with _connect() as conn:
                _listener["backend"] = conn.info.backend_pid
                conn.execute(f"LISTEN {CHANNEL}")
                _copy.up()
                wait = RETRY_SECONDS
                while not stop.is_set():
                    for note in conn.notifies(timeout=IDLE_CHECK_SECONDS):
                        _copy.told(note.payload)
                    conn.execute("SELECT 1")  # a quiet connection: is it still there?
        except Exception:  # noqa: BLE001 - any failure: forget, read the table, try again
            if not stop.is_set():
                logger.warning("versions listener lost; pages read the table", exc_info=True)
        finally:
            _copy.down()
            _listener["backend"] = None
        stop.wait(wait)
        wait = min(wait * 2, MAX_RETRY_SECONDS)  # a server that stays down: a line a minute


def stop() -> None:
    """End this process's listener and drop its copy (a test database cannot be dropped while
    the listening connection is open). The next lookup starts a new one."""
    with _start_lock:
        _listener["stop"].set()
        backend = _listener["backend"]
        _started["pid"] = None
        _copy.down()
    if backend is not None:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [backend])


def notify_sql(table: str) -> tuple[str, str]:
    """The trigger on runs_version that tells the listeners (PostgreSQL only): a function
    and its trigger, per row, for inserts and updates; a delete or truncate says reset."""
    function = f"{table}_notify"
    return (
        f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF TG_OP IN ('INSERT', 'UPDATE') THEN PERFORM pg_notify('{CHANNEL}', NEW.scope || ' ' "
        f"|| NEW.value || ' ' || coalesce(extract(epoch FROM NEW.changed_at)::float8::text, ''));"
        f" ELSE PERFORM pg_notify('{CHANNEL}', '{RESET}'); END IF; RETURN NULL; END $$",
        function,
    )

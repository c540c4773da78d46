"""The versions PostgreSQL pushes to each process (runs/read/pushed_versions.py): what the
copy keeps and when it gives up, then the real thing on PostgreSQL with committed writes."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from runs.read import freshness, pushed_versions
from runs.read.pushed_versions import Copy, parse
from tests.factories import RunFactory

# The copy alone ---------------------------------------------------------------------------


def rows(**versions):
    return lambda scopes: [(s, versions[s], None) for s in scopes if s in versions]


def test_no_copy_until_listening():
    copy = Copy()
    assert copy.lookup(("data",), rows(data=3)) is None
    copy.up()
    assert copy.lookup(("data",), rows(data=3)) == {"data": (3, None)}


def test_a_read_fills_gaps_and_is_then_answered_from_the_copy():
    copy = Copy()
    copy.up()
    asked = []

    def read(scopes):
        asked.append(scopes)
        return [("data", 7, None)]

    assert copy.lookup(("data", "run:abc"), read) == {"data": (7, None), "run:abc": (0, None)}
    assert copy.lookup(("data", "run:abc"), read) == {"data": (7, None), "run:abc": (0, None)}
    assert asked == [("data", "run:abc")]  # the second lookup asked nothing


def test_a_notification_during_a_read_wins_over_the_read():
    """The read began before a commit whose notification came in while it ran: the read's
    older value must not overwrite it."""
    copy = Copy()
    copy.up()

    def read(scopes):
        copy.told("data 9 1700000000.5")  # committed after the read's snapshot
        return [("data", 8, None)]

    assert copy.lookup(("data",), read)["data"] == (8, None)  # this request saw its read
    assert copy.lookup(("data",), rows())["data"][0] == 9  # the copy kept the newer one


def test_a_read_across_a_lost_connection_is_not_kept():
    copy = Copy()
    copy.up()

    def read(scopes):
        copy.down()  # the connection dropped: notifications may be lost from here
        copy.up()
        return [("data", 4, None)]

    copy.lookup(("data",), read)
    asked = []
    copy.lookup(("data",), lambda scopes: asked.append(scopes) or [("data", 5, None)])
    assert asked == [("data",)]  # read again, not served from the read before the gap


def test_notifications_overwrite_in_commit_order_and_a_reset_forgets():
    copy = Copy()
    copy.up()
    copy.told("run:ab12 1 1700000000.25")
    copy.told("run:ab12 2 1700000001.75")
    assert copy.lookup(("run:ab12",), rows())["run:ab12"] == (
        2,
        datetime.fromtimestamp(1700000001.75, UTC),
    )
    copy.told(pushed_versions.RESET)
    assert copy.lookup(("run:ab12",), rows())["run:ab12"] == (0, None)


def test_down_forgets_and_answers_none():
    copy = Copy()
    copy.up()
    copy.told("data 3 1700000000.0")
    copy.down()
    assert copy.lookup(("data",), rows(data=3)) is None
    copy.up()
    assert copy.lookup(("data",), rows())["data"] == (0, None)  # nothing from before


def test_payload_with_no_time():
    assert parse("activity:unscoped 12 ") == ("activity:unscoped", 12, None)
    assert parse("run:0a1b2c3d 3 1700000000.123456")[:2] == ("run:0a1b2c3d", 3)


def test_every_change_to_the_copy_moves_its_number():
    copy = Copy()
    seen = [copy.changes]

    def moved() -> bool:
        seen.append(copy.changes)
        return seen[-1] != seen[-2]

    copy.up()
    assert moved()
    copy.lookup(("data",), rows(data=3))  # a read filled a gap
    assert moved()
    copy.lookup(("data",), rows(data=3))  # answered from the copy: nothing changed
    assert not moved()
    copy.told("data 4 1700000000.5")
    assert moved()
    copy.told(pushed_versions.RESET)
    assert moved()
    copy.down()
    assert moved()


def test_versions_from_the_copy_are_worked_out_once_while_it_stands(monkeypatch):
    """A cached page asks for the same scopes on every request: their Versions (values, times,
    key) are worked out once per state of the copy, and anew as soon as it moves."""
    state = {"changes": 1, "data": 7}
    looked = []

    def lookup(scopes, read):
        looked.append(scopes)
        return {"data": (state["data"], datetime.fromtimestamp(1700000000, UTC))}

    monkeypatch.setattr(pushed_versions, "changes", lambda: state["changes"])
    monkeypatch.setattr(pushed_versions, "lookup", lookup)
    first = freshness.current(["data"], pushed=True)
    assert freshness.current(["data"], pushed=True) is first
    assert len(looked) == 1
    state.update(changes=2, data=8)  # a notification came in
    moved = freshness.current(["data"], pushed=True)
    assert moved.values == {"data": 8} and moved.key != first.key
    assert len(looked) == 2
    state["changes"] = None  # no live copy: every request asks (and the real lookup reads)
    freshness.current(["data"], pushed=True)
    freshness.current(["data"], pushed=True)
    assert len(looked) == 4


def test_no_number_without_a_live_copy_in_this_process(monkeypatch):
    copy = Copy()
    copy.up()
    monkeypatch.setattr(pushed_versions, "_copy", copy)
    monkeypatch.setattr(pushed_versions, "enabled", lambda: True)
    monkeypatch.setitem(pushed_versions._started, "pid", os.getpid())
    assert pushed_versions.changes() == copy.changes  # listening here, live, enabled
    monkeypatch.setitem(pushed_versions._started, "pid", os.getpid() + 1)
    assert pushed_versions.changes() is None  # a forked child before its own listener starts
    monkeypatch.setitem(pushed_versions._started, "pid", os.getpid())
    monkeypatch.setattr(pushed_versions, "enabled", lambda: False)
    assert pushed_versions.changes() is None  # turned off
    monkeypatch.setattr(pushed_versions, "enabled", lambda: True)
    copy.down()
    assert pushed_versions.changes() is None  # the connection is down


def test_the_versions_kept_from_the_copy_are_bounded(monkeypatch):
    monkeypatch.setattr(pushed_versions, "changes", lambda: 1)
    monkeypatch.setattr(pushed_versions, "lookup", lambda scopes, read: {})
    monkeypatch.setattr(freshness, "MADE_MOST", 3)
    for n in range(10):
        freshness.current([f"run:{n:08x}"], pushed=True)
        assert len(freshness._made["now"][1]) <= 3


# On PostgreSQL, with commits ------------------------------------------------------------

pg = pytest.mark.services


def _until(check, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return False


@pytest.fixture
def listening(services, settings, transactional_db):
    settings.PUSHED_VERSIONS = True
    # The first lookup starts the listener; wait until its LISTEN is up.
    assert _until(lambda: pushed_versions.lookup(("data",), freshness._read) is not None)
    yield
    pushed_versions.stop()
    settings.PUSHED_VERSIONS = False


def _data_version() -> int:
    return pushed_versions._copy.lookup(("data",), freshness._read)["data"][0]


def _settled(scopes) -> None:
    """Wait until every commit so far has reached the copy (a factory's inserts each commit,
    and their notifications may still be on their way). For scopes the copy holds: a request
    through it has read them (a scope an earlier test committed and nobody has read since is
    in the table and not in the copy)."""
    copy = pushed_versions._copy
    table = {scope: (value, at) for scope, value, at in freshness._read(tuple(scopes))}
    assert _until(
        lambda: all(copy.values.get(s, (0, None)) == table.get(s, (0, None)) for s in scopes)
    )


@pg
def test_an_anonymous_cached_page_asks_the_database_nothing(client, listening):
    run = RunFactory()
    url = f"/runs/{run.public_id}/"
    assert client.get(url)["X-Page-Cache"] == "miss"  # and the copy holds the page's scopes
    # The factory's last commits may still have been on their way: a page stored under a
    # version the copy then moved past is, rightly, a miss the next time.
    _settled(freshness.run_page(run.public_id))
    client.get(url)  # stored under the settled versions
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response["X-Page-Cache"] == "hit"
    assert len(queries) == 0, [q["sql"] for q in queries]


@pg
def test_a_committed_write_reaches_the_copy_and_retires_the_page(client, listening):
    run = RunFactory()
    url = f"/runs/{run.public_id}/"
    assert b"evidence-checked" not in client.get(url).content
    before = _data_version()
    with transaction.atomic():
        run.evidence = "checked"
        run.save()
    assert _until(lambda: _data_version() > before), "the commit never reached the copy"
    response = client.get(url)
    assert response["X-Page-Cache"] == "miss"
    assert b"evidence-checked" in response.content


@pg
def test_the_copy_is_what_anonymous_pages_read(client, alice, listening):
    """Held back to an old version, the copy serves anonymous readers the page stored under
    it; a signed-in reader reads the table and sees the write."""
    run = RunFactory()
    url = f"/runs/{run.public_id}/"
    client.get(url)
    copy = pushed_versions._copy
    _settled(freshness.run_page(run.public_id))
    client.get(url)  # stored under the settled versions
    old = {s: copy.values[s] for s in freshness.run_page(run.public_id)}
    with transaction.atomic():
        run.evidence = "checked"
        run.save()
    assert _until(lambda: copy.values.get("data") != old["data"])
    with copy.lock:
        copy.values.update(old)  # as if the notification were still on its way
    assert b"evidence-checked" not in client.get(url).content
    client.force_login(alice)
    assert b"evidence-checked" in client.get(url).content


@pg
def test_a_lost_listener_means_every_request_reads_the_table(client, listening):
    run = RunFactory()
    url = f"/runs/{run.public_id}/"
    client.get(url)
    backend = pushed_versions._listener["backend"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [backend])
    assert _until(lambda: pushed_versions._listener["backend"] != backend)
    # Down or already back up with an empty copy: either way nothing from before is believed.
    with transaction.atomic():
        run.evidence = "checked"
        run.save()
    assert b"evidence-checked" in client.get(url).content
    assert _until(lambda: pushed_versions._listener["backend"] not in (None, backend))
    client.get(url)  # back up: the new copy is filled by a read
    _settled(freshness.run_page(run.public_id))
    client.get(url)
    with CaptureQueriesContext(connection) as queries:
        assert b"evidence-checked" in client.get(url).content
    assert len(queries) == 0

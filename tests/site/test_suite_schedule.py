"""How the suite is spread over pytest-xdist's workers (tests/conftest.py): the demo database's
readers form one unit of work, and on SQLite the newcomer's walk joins it, first, so that its
quick start's load is the demo database (quick_start_loaded) instead of a second load."""

from __future__ import annotations

import sqlite3
from types import SimpleNamespace

import pytest

from tests import conftest

READERS = conftest.DEMO_DATABASE_FILES


def _scopes(monkeypatch, on_sqlite: bool) -> dict[str, str]:
    monkeypatch.setattr(conftest, "_on_sqlite", lambda: on_sqlite)
    config = SimpleNamespace(getvalue={"dist": "loadfile", "tx": ["2*popen"]}.get)
    scheduler = conftest.pytest_xdist_make_scheduler(config, None)
    files = (*READERS, conftest.WALK, "tests/site/test_smoke.py")
    return {path: scheduler._split_scope(f"{path}::test_x") for path in files}


def test_on_sqlite_the_walk_runs_in_the_demo_database_unit(monkeypatch):
    scopes = _scopes(monkeypatch, on_sqlite=True)
    assert {scopes[p] for p in (*READERS, conftest.WALK)} == {"demo database"}
    assert scopes["tests/site/test_smoke.py"] == "tests/site/test_smoke.py"


def test_on_postgresql_the_walk_is_a_unit_of_its_own(monkeypatch):
    scopes = _scopes(monkeypatch, on_sqlite=False)
    assert {scopes[p] for p in READERS} == {"demo database"}
    assert scopes[conftest.WALK] == conftest.WALK


def test_the_walk_comes_first_in_its_unit():
    # Tests run in collection order within a unit (`--no-loadscope-reorder`), and the order
    # is SLOW_FIRST's: the walk's copy must exist before the first reader asks for it.
    order = [name.rsplit("/", 1)[-1] for name in (conftest.WALK, *READERS)]
    ranks = [conftest.SLOW_FIRST.index(name) for name in order]
    assert ranks[0] < min(ranks[1:])


def _request(readers: bool):
    item = SimpleNamespace(fixturenames=["demo_db"] if readers else ["db"])
    config = SimpleNamespace(stash=pytest.Stash())
    return SimpleNamespace(session=SimpleNamespace(items=[item]), config=config)


def _loaded(tmp_path):
    database = tmp_path / "served.sqlite3"
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE runs_run (public_id TEXT)")
        db.executemany("INSERT INTO runs_run VALUES (?)", [("8827e3bb",), ("a9dce116",)])
    return database


def test_the_quick_starts_database_is_copied_for_the_readers(monkeypatch, tmp_path_factory):
    monkeypatch.setattr(conftest, "_on_sqlite", lambda: True)
    tmp_path = tmp_path_factory.mktemp("walk")
    request = _request(readers=True)
    served = _loaded(tmp_path)
    conftest.quick_start_loaded(request, tmp_path_factory, served)
    copy = request.config.stash[conftest.QUICK_START_DATABASE]
    assert copy != served
    # A copy, not the file the walk's server goes on writing to.
    with sqlite3.connect(served) as db:
        db.execute("DELETE FROM runs_run")
    with sqlite3.connect(copy) as db:
        rows = db.execute("SELECT public_id FROM runs_run ORDER BY public_id").fetchall()
    assert rows == [("8827e3bb",), ("a9dce116",)]


@pytest.mark.parametrize(
    ("on_sqlite", "readers"), [(False, True), (True, False)], ids=["postgresql", "no-readers"]
)
def test_nothing_is_copied_where_no_reader_would_read_it(
    monkeypatch, tmp_path_factory, on_sqlite, readers
):
    monkeypatch.setattr(conftest, "_on_sqlite", lambda: on_sqlite)
    tmp_path = tmp_path_factory.mktemp("walk")
    request = _request(readers=readers)
    conftest.quick_start_loaded(request, tmp_path_factory, _loaded(tmp_path))
    assert conftest.QUICK_START_DATABASE not in request.config.stash

"""The data fingerprint and page cache: a cache outage degrades to rendering, never to errors."""

from __future__ import annotations

import pytest
from django.core.cache.backends.base import BaseCache
from django.test import override_settings

from tests.factories import RunFactory


class BrokenCache(BaseCache):
    """A cache whose server is down."""

    def __init__(self, location, params):
        super().__init__(params)

    def _fail(self, *args, **kwargs):
        raise ConnectionError("cache server is down")

    get = set = add = delete = incr = clear = _fail


@pytest.mark.django_db
def test_pages_and_writes_survive_a_cache_outage(client, settings):
    run = RunFactory()
    settings.PAGE_CACHE_SECONDS = 300
    broken = {
        **settings.CACHES,
        "default": {"BACKEND": "tests.runs.read.test_freshness.BrokenCache"},
    }
    with override_settings(CACHES=broken):
        response = client.get(f"/runs/{run.public_id}/")
        assert response.status_code == 200 and response["ETag"]
        run.evidence = "checked"
        run.save()  # the save's fingerprint bump fails quietly, the write stands
        assert b"evidence-checked" in client.get(f"/runs/{run.public_id}/").content


@pytest.mark.django_db(transaction=True)
def test_the_versions_read_is_the_connection_health_check(client, monkeypatch):
    """A request's versions query stands in for CONN_HEALTH_CHECKS' SELECT 1: no SELECT 1 is
    sent, and a reused connection that fails there is closed and the query asked again on a
    new one, so the page still answers."""
    from django.db import OperationalError, connection

    from runs.read import freshness

    run = RunFactory()
    url = f"/runs/{run.public_id}/"
    assert client.get(url).status_code == 200
    calls, closed = [], []
    select = freshness._select

    def failing_once(conn, scopes):
        calls.append(scopes)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return select(conn, scopes)

    monkeypatch.setattr(freshness, "_select", failing_once)
    monkeypatch.setattr(connection, "is_usable", lambda: pytest.fail("a SELECT 1 was sent"))
    monkeypatch.setattr(connection, "close", lambda: closed.append(True))
    connection.ensure_connection()
    connection.health_check_enabled, connection.health_check_done = True, False
    assert client.get(url).status_code == 200
    assert len(calls) == 2 and closed == [True]
    # Checked once per request: the next query of the same request is not checked again.
    assert connection.health_check_done


@pytest.mark.services
def test_an_earlier_releases_notify_trigger_is_dropped_on_migrate(services):
    """Databases migrated by an earlier release told listening processes of every moved
    version; nothing listens now, so a migration drops that trigger."""
    import importlib

    from django.apps import apps
    from django.db import connection

    migration = importlib.import_module("runs.migrations.0020_drop_version_notify")

    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE OR REPLACE FUNCTION runs_version_notify() RETURNS trigger "
            "LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER ki_version_notify_row AFTER INSERT OR UPDATE ON runs_version "
            "FOR EACH ROW EXECUTE FUNCTION runs_version_notify()"
        )
        with connection.schema_editor() as editor:
            migration.drop_notify(apps, editor)
        cursor.execute(
            "SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'ki_version_notify%%' "
            "UNION ALL SELECT count(*) FROM pg_proc WHERE proname = 'runs_version_notify'"
        )
        assert [n for (n,) in cursor.fetchall()] == [0, 0]

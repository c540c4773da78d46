"""No page outlives a write to what it reads, and no write retires a page that does not read it.

Every write to a public table, whatever API made it, moves the versions of what it wrote in its
own transaction (database triggers, runs/read/freshness.py); pages, their kept parts and their
ETags are keyed by the versions they read."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext

from attestations import services as community
from reruns.models import JobState, RerunJob
from reruns.services import (
    rerun_approve,
    rerun_attempt_failed,
    rerun_cancel,
    rerun_claim,
    rerun_sweep,
)
from runs.models import Run, Version
from runs.read import freshness
from tests.factories import RunFactory
from tests.factories_attestations import make_staff, verify_email
from tests.factories_reruns import job_for

pytestmark = pytest.mark.django_db


def _versions() -> dict[str, int]:
    return dict(Version.objects.values_list("scope", "value"))


def _triggered_tables() -> dict[str, set[str]]:
    """{table: {INSERT, UPDATE, DELETE}} as the database's own catalogue lists them."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT event_object_table, event_manipulation FROM information_schema.triggers "
                "WHERE trigger_name LIKE %s",
                [f"{freshness.TRIGGER}%"],
            )
            rows = cursor.fetchall()
        else:
            cursor.execute(
                "SELECT tbl_name, sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE %s",
                [f"{freshness.TRIGGER}_%"],
            )
            rows = [
                (table, op)
                for table, sql in cursor.fetchall()
                for op in ("INSERT", "UPDATE", "DELETE")
                if f"AFTER {op} ON" in sql
            ]
    found: dict[str, set[str]] = {}
    for table, op in rows:
        found.setdefault(table, set()).add(op)
    return found


def test_every_table_of_the_public_apps_moves_a_version():
    """Found from the app registry, not from a list: a model added later is covered too."""
    public = {c.label for c in apps.get_app_configs() if getattr(c, "public_data", False)}
    expected = {
        model._meta.db_table
        for model in apps.get_models(include_auto_created=True)
        if model._meta.app_label in public
        and model._meta.model_name
        not in getattr(apps.get_app_config(model._meta.app_label), "private_models", ())
    }
    assert expected == {model._meta.db_table for model in freshness.versioned_models()}
    assert len(expected) >= 15
    triggered = _triggered_tables()
    assert {t: ops for t, ops in triggered.items() if t in expected} == {
        t: {"INSERT", "UPDATE", "DELETE"} for t in expected
    }


def test_rows_about_a_run_move_that_run_s_version():
    """Jobs and attestations name their run; receipts and moderation events through a parent."""
    from attestations.models import ModerationEvent
    from reruns.models import ResultReceipt

    assert freshness.run_paths(RerunJob, "NEW") == ["NEW.run_id"]
    assert any("reruns_rerunjob" in p for p in freshness.run_paths(ResultReceipt, "NEW"))
    assert len(freshness.run_paths(ModerationEvent, "NEW")) == 2  # attestation, report


def test_every_rerun_job_write_moves_its_run_and_nothing_else(settings):
    settings.RERUN_MAX_ATTEMPTS = 1
    run, other = RunFactory(), RunFactory()
    awaiting = job_for(run, state=JobState.AWAITING_APPROVAL, gpu_class="h200")
    queued = job_for(run)
    spent = job_for(run, gpu_class="a100", attempts=3, max_attempts=3)
    staff = make_staff()
    steps = [
        lambda: rerun_approve(job=awaiting, approved_by=staff),
        lambda: rerun_claim(job_pk=queued.pk),
        lambda: rerun_attempt_failed(job=queued, error="lost the GPU", retry=False),
        lambda: rerun_sweep()["failed"] == 1 or pytest.fail("the sweep wrote nothing"),
        lambda: rerun_cancel(job=awaiting),
        lambda: RerunJob.objects.filter(pk=spent.pk).delete(),
    ]
    mine, theirs = freshness.run_scope(run.public_id), freshness.run_scope(other.public_id)
    for number, step in enumerate(steps):
        before = _versions()
        step()
        after = _versions()
        assert after[mine] > before.get(mine, 0), f"step {number} did not move the run's version"
        jobs, community = freshness.activity_of("reruns"), freshness.activity_of("attestations")
        assert after[jobs] > before.get(jobs, 0)
        for scope in (freshness.DATA, theirs, freshness.UNSCOPED, community):
            assert after.get(scope) == before.get(scope), f"step {number} moved {scope}"


def test_run_data_writes_move_the_data_version_by_any_api():
    run = RunFactory()
    steps = [
        lambda: Run.objects.filter(pk=run.pk).update(rank=7),
        lambda: connection.cursor().execute(
            f"UPDATE {Run._meta.db_table} SET rank = 8 WHERE id = %s", [run.pk]
        ),
        lambda: RunFactory(),
    ]
    for number, step in enumerate(steps):
        before = freshness.current([freshness.DATA]).key
        step()
        assert freshness.current([freshness.DATA]).key != before, f"step {number} moved nothing"


@pytest.mark.django_db(transaction=True)
def test_the_data_row_moves_once_a_transaction_and_the_key_every_statement():
    """On PostgreSQL a transaction moves the `data` row once, however many statements it makes
    on the run data (each update of a row in one transaction leaves a version every later one
    walks); inside it, each statement still gives a new key, and the committed key is none
    of those, so no value kept inside is read outside. A savepoint rolled back takes its
    statements' moves with it."""
    from django.db import transaction

    if connection.vendor != "postgresql":
        pytest.skip("SQLite moves the row on every statement (no row versions to walk)")
    run = RunFactory()
    committed = _versions()[freshness.DATA]
    outside = freshness.current([freshness.DATA]).key
    keys = []
    with transaction.atomic():
        for rank in (3, 4, 5):
            Run.objects.filter(pk=run.pk).update(rank=rank)
            keys.append(freshness.current([freshness.DATA]).key)
        assert _versions()[freshness.DATA] == committed + 1
        try:
            with transaction.atomic():
                Run.objects.filter(pk=run.pk).update(rank=6)
                assert freshness.current([freshness.DATA]).key not in keys
                raise RuntimeError
        except RuntimeError:
            pass
        assert freshness.current([freshness.DATA]).key == keys[-1]
    assert len(set(keys)) == 3
    after = freshness.current([freshness.DATA])
    assert after.writing == "" and after.key not in {outside, *keys}
    assert _versions()[freshness.DATA] == committed + 1


def _cached(client, url: str) -> str:
    return client.get(url).get("X-Page-Cache", "")


def test_a_write_about_run_a_retires_a_s_page_only(client, settings, alice):
    """A job claim or a pending attestation on run A: A's page is rendered again and shows it;
    run B's page, the home page and browse are still served from the cache. The benchmark
    page's community panel reads every attestation, not jobs."""
    settings.PAGE_CACHE_SECONDS = 300
    a, b = RunFactory(), RunFactory()
    job = job_for(a)
    urls = [f"/runs/{a.public_id}/", f"/runs/{b.public_id}/", "/", "/runs/"]
    benchmark = f"/benchmarks/{a.benchmark.slug}/"
    for url in [*urls, benchmark]:
        assert _cached(client, url) == "miss"
        assert _cached(client, url) == "hit"
    rerun_claim(job_pk=job.pk)
    page_a = client.get(urls[0])
    assert page_a["X-Page-Cache"] == "miss" and "Running" in page_a.content.decode()
    assert [_cached(client, url) for url in [*urls[1:], benchmark]] == ["hit"] * 4
    verify_email(alice)
    community.attestation_create(run=a, author=alice, kind="note", body="Seen it too.")
    assert _cached(client, urls[0]) == "miss"
    assert [_cached(client, url) for url in urls[1:]] == ["hit"] * 3
    assert _cached(client, benchmark) == "miss"


def test_no_page_is_stale_after_an_ingest_write(client, settings):
    """A new run (what ingest writes) retires every page that reads the run data, and each
    shows the new run at once."""
    settings.PAGE_CACHE_SECONDS = 300
    old = RunFactory()
    urls = ["/", "/runs/", "/feeds/runs.atom", "/api/v1/runs/", f"/runs/{old.public_id}/"]
    for url in urls:
        client.get(url)
        assert _cached(client, url) == "hit", url
    new = RunFactory()
    for url in urls:
        response = client.get(url)
        assert response["X-Page-Cache"] == "miss", url
        if url != urls[-1]:
            assert new.public_id in response.content.decode(), url


@pytest.mark.parametrize("url", ["/feeds/runs.atom", "/", "/runs/", "run"])
def test_conditional_get_answers_304_until_what_the_page_reads_moves(client, url):
    run = RunFactory()
    url = f"/runs/{run.public_id}/" if url == "run" else url
    first = client.get(url)
    assert first.status_code == 200 and first["ETag"]
    # Browsers and proxies may keep the page but ask first: the ETag answers.
    assert "no-cache" in first["Cache-Control"] and "max-age" not in first["Cache-Control"]
    again = client.get(url, HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304
    Run.objects.filter(pk=run.pk).update(rank=9)
    assert client.get(url, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 200


def test_kept_values_follow_their_versions():
    calls = []

    def compute():
        calls.append(1)
        return len(calls)

    assert freshness.cached("t", [freshness.DATA], compute) == 1
    assert freshness.cached("t", [freshness.DATA], compute) == 1
    job_for(RunFactory())  # moves data (a run) and then activity (a job)
    assert freshness.cached("t", [freshness.DATA], compute) == 2
    assert freshness.cached("t", [freshness.DATA], compute) == 2


def test_the_first_home_page_after_a_job_claim_reads_only_its_versions(client, settings):
    """Everything on the home page reads the run data only: a write about one run leaves it
    kept, so the next reader (page cache off) is answered with one query and scans no runs;
    after an ingest the counts are read again from the tallies and the newest runs move."""
    settings.PAGE_CACHE_SECONDS = 0
    job = job_for(RunFactory())
    client.get("/")
    rerun_claim(job_pk=job.pk)
    with CaptureQueriesContext(connection) as ctx:
        assert client.get("/").status_code == 200
    assert not [q for q in ctx.captured_queries if "COUNT(" in q["sql"]]
    assert [q["sql"] for q in ctx.captured_queries if "runs_version" not in q["sql"]] == []
    newest = RunFactory()  # an ingest's write: the counts are read again, from the tallies
    with CaptureQueriesContext(connection) as ctx:
        page = client.get("/").content.decode()
    sql = [q["sql"] for q in ctx.captured_queries]
    assert not [q for q in sql if "COUNT(" in q] and [q for q in sql if "runs_tally" in q]
    assert f"/runs/{newest.public_id}/" in page


def test_the_feed_is_kept_under_the_data_version(client, settings):
    """The Atom feed reads the run data only: asked again it is one query (its versions), and
    a new run is in the next one."""
    settings.PAGE_CACHE_SECONDS = 0
    RunFactory()
    first = client.get("/feeds/runs.atom")
    assert first["Content-Type"].startswith("application/atom+xml")
    with CaptureQueriesContext(connection) as ctx:
        assert client.get("/feeds/runs.atom").content == first.content
    assert len(ctx) == 1
    newest = RunFactory()
    assert f"/runs/{newest.public_id}/".encode() in client.get("/feeds/runs.atom").content

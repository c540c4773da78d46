"""The page cache never serves a stale page: any write to a public table, whatever API made it,
moves the data version in its own transaction (database triggers), and the page cache is keyed
by that version."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import connection

from reruns.models import JobState, RerunJob
from reruns.services import (
    rerun_approve,
    rerun_attempt_failed,
    rerun_cancel,
    rerun_claim,
    rerun_sweep,
)
from runs.models import DataVersion, Run
from runs.read import freshness
from tests.factories import RunFactory
from tests.factories_community import make_staff
from tests.factories_reruns import job_for

pytestmark = pytest.mark.django_db


def _version() -> int:
    return DataVersion.objects.filter(pk=1).values_list("value", flat=True).first() or 0


def _triggered_tables() -> dict[str, set[str]]:
    """{table: {INSERT, UPDATE, DELETE}} as the database's own catalogue lists them."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT event_object_table, event_manipulation FROM information_schema.triggers "
                "WHERE trigger_name = %s",
                [freshness.TRIGGER],
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


def test_every_table_of_the_public_apps_moves_the_version():
    """Found from the app registry, not from a list: a model added later is covered too."""
    expected = {
        model._meta.db_table
        for model in apps.get_models(include_auto_created=True)
        if model._meta.app_label in freshness.public_data_apps()
        and model._meta.label_lower not in freshness.private_models()
    }
    assert len(expected) >= 15
    triggered = _triggered_tables()
    assert {t: ops for t, ops in triggered.items() if t in expected} == {
        t: {"INSERT", "UPDATE", "DELETE"} for t in expected
    }


def test_every_rerun_job_write_moves_the_version(settings):
    settings.RERUN_MAX_ATTEMPTS = 1
    run = RunFactory()
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
        lambda: Run.objects.filter(pk=run.pk).update(rank=7),
        lambda: connection.cursor().execute(
            f"UPDATE {Run._meta.db_table} SET rank = 8 WHERE id = %s", [run.pk]
        ),
    ]
    for number, step in enumerate(steps):
        before = _version()
        step()
        assert _version() > before, f"step {number} wrote without moving the version"


def test_a_cached_page_never_outlives_a_job_update(client, settings):
    settings.PAGE_CACHE_SECONDS = 300
    settings.FINGERPRINT_TTL = 0
    run = RunFactory()
    job = job_for(run)
    first = client.get(f"/runs/{run.public_id}/")
    assert "Queued" in first.content.decode()
    assert client.get(f"/runs/{run.public_id}/")["X-Page-Cache"] == "hit"
    # A bulk update sends no signal and calls nothing: the trigger alone retires the page.
    RerunJob.objects.filter(pk=job.pk).update(state=JobState.CANCELLED)
    again = client.get(f"/runs/{run.public_id}/")
    assert again["X-Page-Cache"] == "miss" and "Cancelled" in again.content.decode()

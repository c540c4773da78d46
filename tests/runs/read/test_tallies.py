"""The home page's counts are kept by the write side (runs/read/tallies.py): after every kind of
write to the runs and the groups (ingest, a revision retiring a run, an evidence change,
deletes, a recount after migrate) each tally equals the COUNT it stands for, and the home page
reads them without counting any run."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models import Count
from django.test.utils import CaptureQueriesContext

from runs.models import ComparisonGroup, Evidence, Run, Tally
from runs.read import tallies
from tests.conftest import KERNELBENCH
from tests.pages import text_of


def _counted() -> dict[tuple[int, int, int], tuple[int, int]]:
    """{(benchmark, environment, source): (current runs, groups)} counted from the tables."""
    found: dict[tuple[int, int, int], list[int]] = {}
    runs = (
        Run.objects.filter(is_current=True)
        .order_by()
        .values_list("benchmark_id", "environment_id", "source_id")
    )
    for *key, n in runs.annotate(n=Count("id")):
        found.setdefault(tuple(key), [0, 0])[0] = n
    groups = ComparisonGroup.objects.order_by().values_list(
        "benchmark_id", "environment_id", "publication__source_id"
    )
    for *key, n in groups.annotate(n=Count("id")):
        found.setdefault(tuple(key), [0, 0])[1] = n
    return {key: tuple(v) for key, v in found.items()}


def _tallied() -> dict[tuple[int, int, int], tuple[int, int]]:
    rows = Tally.objects.values_list(
        "benchmark_id", "environment_id", "source_id", "runs", "groups"
    )
    return {(b, e, s): (n, g) for b, e, s, n, g in rows if n or g}


def _agree() -> None:
    counted = _counted()
    assert counted, "nothing to count: the test wrote no runs"
    assert _tallied() == counted


@pytest.mark.django_db
def test_tallies_follow_ingest_revisions_evidence_and_deletes(liger_bench):
    _agree()
    from runs.sources.pipeline import ingest

    ingest(source_slug="kernelbench", locations=[str(KERNELBENCH)])
    _agree()
    # A revision retires the current row (is_current off) and writes the next one.
    retired = list(Run.objects.filter(source__slug="kernelbench")[:7].values_list("pk", flat=True))
    Run.objects.filter(pk__in=retired).update(is_current=False, rank=None)
    _agree()
    Run.objects.filter(pk__in=retired[:3]).update(is_current=True)
    _agree()
    Run.objects.filter(pk__in=retired[3:5]).update(evidence=Evidence.CHECKED)
    _agree()
    # Deletes: a few runs, then a group left without runs.
    group = Run.objects.get(pk=retired[0]).group_id
    Run.objects.filter(group_id=group).delete()
    Run.objects.filter(pk__in=retired[5:]).delete()
    _agree()
    ComparisonGroup.objects.filter(pk=group).delete()
    _agree()


@pytest.mark.django_db
def test_install_recounts_what_was_written_before_the_triggers(liger_bench):
    Tally.objects.all().delete()
    Tally.objects.create(benchmark_id=1, environment_id=1, source_id=1, runs=99, groups=9)
    tallies.install()
    _agree()


@pytest.mark.django_db
def test_home_reads_the_tallies_and_counts_no_run(client, liger_bench):
    with CaptureQueriesContext(connection) as ctx:
        text = text_of(client.get("/"))
    assert "2,448 runs in 1,082 comparison groups, from 1 source" in text
    counting = [q["sql"] for q in ctx.captured_queries if "COUNT(" in q["sql"].upper()]
    assert counting == []

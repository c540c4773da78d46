"""The per-process catalogue copies: reloaded on a data change, and at once on a miss."""

from __future__ import annotations

import pytest

from runs.models import Publication, Run
from runs.read import memo
from tests.factories import RunFactory, SourceFactory


@pytest.mark.django_db
def test_attach_reloads_when_a_run_points_at_an_unseen_row(django_assert_num_queries):
    run = RunFactory()
    memo.tables()
    fresh = Run.objects.get(pk=run.pk)
    with django_assert_num_queries(0):  # warm: nothing to fetch
        memo.attach([fresh])
    assert fresh.publication.slug == "all_benchmark_data.csv"
    # A row committed without a signal (bulk write) inside the fingerprint's reuse window.
    (new,) = Publication.objects.bulk_create(
        [Publication(source=SourceFactory(), slug="later.csv", sequence=2)]
    )
    Run.objects.filter(pk=run.pk).update(publication=new)
    moved = Run.objects.get(pk=run.pk)
    memo.attach([moved])
    assert moved.publication.slug == "later.csv" and moved.publication.source.slug


@pytest.mark.django_db
def test_a_data_change_reloads_the_copies():
    run = RunFactory()
    before = memo.tables()
    run.benchmark.title = "Renamed"
    run.benchmark.save()  # a save of a runs model bumps the fingerprint
    assert memo.tables() is not before
    assert memo.tables()["benchmark"][run.benchmark_id].title == "Renamed"

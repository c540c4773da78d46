"""Judged claims over the real signed H200 batches: stored when an evidence event is written,
shown beside the speed-ups (benchmark page, group page, the run page's "Compare with #1"), a
page per source and the API, with constant query counts."""

from __future__ import annotations

import html
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.claims.models import JudgedClaim
from runs.claims.rule import SEVERITY
from runs.sources.pipeline import ingest

DATA = Path(__file__).resolve().parents[3] / "data"


@pytest.fixture(scope="module")
def _committed(django_db_setup, django_db_blocker):
    """The Liger sources and two batches, loaded once for this module and committed: a claim is
    judged when its evidence event commits, as on the site. The tables are emptied at the
    module's end, as `transactional_db` empties them after a test. Loaded with the fidelity
    gate off, as tests/conftest.py turns it off for a test."""
    from runs import evidence

    with django_db_blocker.unblock(), pytest.MonkeyPatch.context() as patch:
        patch.setattr(evidence, "_fidelity_gate", lambda run, meas, impl, outcome: outcome)
        try:
            ingest(
                source_slug="liger-kernel-bench",
                locations=[str(DATA / "liger" / "all_benchmark_data.csv")],
            )
            ingest(source_slug="liger-kernel-ci", locations=[str(DATA / "liger-ci" / "02bac05")])
            for batch in ("h200-2026-11-30", "h200-2026-12-01"):
                call_command(
                    "rerun",
                    "load-demo",
                    str(DATA / "reruns" / batch),
                    stdout=StringIO(),
                    stderr=StringIO(),
                )
            yield
        finally:
            call_command("flush", interactive=False, verbosity=0)


@pytest.fixture
def loaded(_committed, db):
    """The committed data for one test; what the test writes is rolled back at its end."""


def test_claims_are_judged_within_one_process_only(loaded):
    claims = list(JudgedClaim.objects.select_related("better", "other", "group"))
    assert claims, "the 2026-12-01 batch re-measured both sides of its cells in one process"
    for c in claims:
        # Same cell, never across GPU products, both sides rerun by the same process.
        assert c.better.group_id == c.other.group_id == c.group_id
        assert c.better.median <= c.other.median
        assert c.published_ratio == pytest.approx(c.other.median / c.better.median)
        assert c.better_controlled.source.slug == "kernelindex"
        assert not c.process.startswith("job:")
    # What the signal stored is what a full re-judge gives.
    before = sorted((c.better_id, c.other_id, c.verdict) for c in claims)
    call_command("claims", "judge", stdout=StringIO())
    after = sorted(JudgedClaim.objects.values_list("better_id", "other_id", "verdict"))
    assert before == after


def _queries(client, url) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(ctx.captured_queries)


def test_pages_and_api_show_the_claims(loaded, client):
    claim = JudgedClaim.objects.order_by("severity", "id").select_related("group", "better").first()
    page = client.get("/sources/liger-kernel-ci/claims/").content.decode()
    assert claim.get_verdict_display() in page and claim.better.public_id in page
    api = client.get("/api/v1/sources/liger-kernel-ci/claims/").json()
    first = api["results"][0]
    assert first["verdict"] == claim.verdict
    assert first["better"]["run"] == claim.better.public_id
    severities = [r["verdict"] for r in api["results"]]
    assert severities == sorted(severities, key=SEVERITY.get)
    group_page = client.get(claim.group.get_absolute_url()).content.decode()
    assert "Claims re-judged" in group_page and html.escape(claim.why) in group_page
    schema = client.get("/api/v1/schema/").content.decode()
    assert "/api/v1/sources/{slug}/claims/" in schema


def test_both_runs_pages_show_the_claim_the_winners_too(loaded, client):
    """The published winner (rank 1, no "Compare with #1") shows the claim it heads, as the
    other side's page does, with the verdict and the reason in the claim's own words."""
    claim = JudgedClaim.objects.select_related("better", "other").filter(better__rank=1).first()
    assert claim is not None
    winner = client.get(claim.better.get_absolute_url()).content.decode()
    loser = client.get(claim.other.get_absolute_url()).content.decode()
    assert "Compare with #1" not in winner and "Compare with #1" in loser
    for page in (winner, loser):
        assert "claim-line" in page and f"claim-{claim.verdict}" in page
        assert claim.better_controlled.public_id in page
    # On the winner's page its own claims come first.
    first = winner.index("claim-line")
    assert claim.better.implementation.display_name in winner[first : first + 400]


def test_claim_pages_ask_a_constant_number_of_queries(
    loaded, client, django_assert_max_num_queries
):
    """The page and the API ask as many queries for one claim as for every claim, whether
    what they keep is new (the first reader after a data change) or kept (every other)."""
    from runs.read import freshness

    urls = ["/sources/liger-kernel-ci/claims/", "/api/v1/sources/liger-kernel-ci/claims/"]

    def cold(url):
        freshness.reset()
        return _queries(client, url)

    many = [cold(url) for url in urls]
    assert max(many) <= 6
    for url in urls:
        client.get(url)  # keeps what it reads
        with django_assert_max_num_queries(3):  # versions, source, the API's page of ids
            client.get(url)
    # Keep one claim: the page must ask the same number of queries.
    keep = JudgedClaim.objects.order_by("id").first()
    JudgedClaim.objects.exclude(pk=keep.pk).delete()
    assert [cold(url) for url in urls] == many


def test_benchmark_page_shows_the_claim_beside_the_fastest_speed_up(loaded, client):
    # Only 02bac05 is loaded, so it is the CI source's latest publication the page shows.
    page = client.get("/benchmarks/geglu/?source=liger-kernel-ci").content.decode()
    assert 'class="claim claim-' in page and "published: " in page

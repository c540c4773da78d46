"""The run page's "Replications and notes" section (attestations/_run_section.html)."""

from __future__ import annotations

import pytest

from attestations import services
from tests.factories_attestations import AttestationFactory, ReportFactory


def _page(client, run) -> str:
    response = client.get(f"/runs/{run.public_id}/")
    assert response.status_code == 200
    return response.content.decode()


def test_empty_section(client, run):
    page = _page(client, run)
    assert "Replications and notes</h2>" in page
    assert page.count("No attestations yet.") == 1
    sentence = (
        "Community attestations. They never change the evidence level; only a "
        "KernelIndex-controlled rerun does."
    )
    assert page.count(sentence) == 1
    assert page.count(f'href="/runs/{run.public_id}/attest/"') == 1


def test_approved_reproduction_with_difference(client, run, owner):
    AttestationFactory(
        run=run, author=owner, state="approved", median=393_632, p20=None, p80=None, body=""
    )
    page = _page(client, run)
    assert "Replications and notes (1)</h2>" in page
    assert "393.6 µs" in page
    assert "+2.1 % vs published" in page
    assert "No attestations yet." not in page
    assert f"/users/{owner.username}/" in page


def test_negative_difference(client, run, owner):
    AttestationFactory(run=run, author=owner, state="approved", median=377_825)
    assert "-2.0 % vs published" in _page(client, run)


@pytest.mark.parametrize("who, sees_pending", [("owner", True), ("other", False), (None, False)])
def test_pending_only_for_its_author(client, request, run, owner, who, sees_pending):
    AttestationFactory(run=run, author=owner, body="my pending note text")
    if who:
        client.force_login(request.getfixturevalue(who))
    page = _page(client, run)
    assert ("my pending note text" in page) == sees_pending
    assert ("badge-pending" in page) == sees_pending
    # A pending item does not count as an attestation of the run.
    assert "Replications and notes</h2>" in page


def test_hidden_and_rejected_are_not_shown(client, run, owner):
    AttestationFactory(run=run, author=owner, state="hidden", body="hidden-body")
    AttestationFactory(run=run, author=owner, state="rejected", body="rejected-body")
    page = _page(client, run)
    assert "hidden-body" not in page and "rejected-body" not in page
    assert "No attestations yet." in page


def test_markdown_body_is_sanitized_on_the_page(client, run, owner):
    AttestationFactory(
        run=run,
        author=owner,
        state="approved",
        body='<script>alert("x")</script> [x](javascript:alert(1)) **ok**',
    )
    page = _page(client, run)
    assert "<script>alert" not in page
    assert 'href="javascript:' not in page
    assert "<strong>ok</strong>" in page


def test_resolved_report_answer_is_public(client, run, owner, staff):
    report = ReportFactory(run=run, reporter=owner, text="Duplicate of another run")
    assert "Duplicate of another run" not in _page(client, run)
    services.report_answer(report=report, maintainer=staff, state="triaged", answer="Looking")
    assert "Looking" not in _page(client, run)
    services.report_answer(report=report, maintainer=staff, state="resolved", answer="Merged.")
    page = _page(client, run)
    assert "Duplicate of another run" in page and "Merged." in page


def test_query_count_is_constant(client, run, owner, other):
    """The whole run page, logged in (never served from the page cache), at two sizes of the
    section: the count must not grow with the number of attestations and reports."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.force_login(owner)
    counts = []
    for count in (1, 10):
        for i in range(count):
            AttestationFactory(run=run, author=owner if i % 2 else other, state="approved")
            AttestationFactory(run=run, author=owner)
            ReportFactory(run=run, reporter=other, state="resolved", answer="done")
        if count == 1:
            _page(client, run)  # the parts kept under the run data's version, computed once
        with CaptureQueriesContext(connection) as ctx:
            _page(client, run)
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1]
    # Each batch of factories moves this run's version only: session, user, the versions, the
    # run, its data parts (kept under the run data's version); then this run's items (the
    # table beside the controlled reruns shows the approved measured ones among them), answered
    # reports, its rerun jobs, and what the reader watches of its cell, benchmark and source.
    assert counts[1] <= 20


def test_a_reproductions_figures_read_as_the_published_ones_beside_them():
    """One formatter of measurements (runs.pages.units): a contributor's median and the
    published median on the same page are written alike."""
    from attestations.templatetags.attestations import measure as reproduction
    from runs.templatetags.runs_tags import measure as published

    for value, unit in [(12345, "ns"), (385536, "ns"), (2_500_000_000, "ns"), (999, "ns"),
                        (39007436, "B"), (512, "B"), (None, "ns")]:  # fmt: skip
        assert reproduction(value, unit) == published(value, unit)
    assert reproduction(12345, "ns") == "12.35 µs"  # was "12.3 µs" beside the run's "12.35 µs"

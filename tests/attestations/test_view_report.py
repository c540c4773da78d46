"""/runs/<id>/report/ and /me/reports/."""

from __future__ import annotations

import pytest
from django.core import mail
from django.test import Client

from attestations import services
from attestations.models import Report
from tests.factories_attestations import ReportFactory


def _url(run) -> str:
    return f"/runs/{run.public_id}/report/"


def test_anonymous_is_sent_to_login(client, run):
    assert client.get(_url(run)).status_code == 302
    assert client.post(_url(run), {"category": "other", "text": "x"}).status_code == 302
    assert not Report.objects.exists()


def test_report_and_follow_it(client, run, owner, staff, django_capture_on_commit_callbacks):
    client.force_login(owner)
    assert client.get(_url(run)).status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(_url(run), {"category": "wrong_data", "text": "p80 < median"})
    assert response.status_code == 302
    assert response["Location"] == "/me/reports/"
    assert [m.to for m in mail.outbox] == [[staff.email]]
    page = client.get("/me/reports/").content.decode()
    assert "p80 &lt; median" in page
    assert "Open" in page

    report = Report.objects.get()
    services.report_answer(
        report=report, maintainer=staff, state="resolved", answer="Upstream re-ran it."
    )
    page = client.get("/me/reports/").content.decode()
    assert "Resolved" in page and "Upstream re-ran it." in page


@pytest.mark.parametrize(
    "data, message",
    [
        ({"category": "bogus", "text": "x"}, "Select a valid choice"),
        ({"category": "other", "text": ""}, "This field is required"),
        ({"category": "other", "text": "x" * 20_001}, "at most 20000 characters"),
    ],
)
def test_bad_input(client, run, owner, data, message):
    client.force_login(owner)
    response = client.post(_url(run), data)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Report.objects.exists()


def test_unverified_cannot_report(client, run, stranger):
    client.force_login(stranger)
    assert client.post(_url(run), {"category": "other", "text": "x"}).status_code == 403
    assert not Report.objects.exists()


def test_csrf_is_enforced(run, owner):
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(owner)
    assert csrf_client.post(_url(run), {"category": "other", "text": "x"}).status_code == 403
    assert not Report.objects.exists()


def test_rate_limit(client, run, owner, settings):
    settings.COMMUNITY_RATE_LIMITS = {**settings.COMMUNITY_RATE_LIMITS, "report": (1, 3600)}
    client.force_login(owner)
    data = {"category": "other", "text": "x"}
    assert [client.post(_url(run), data).status_code for _ in range(2)] == [302, 429]
    assert Report.objects.count() == 1


@pytest.mark.parametrize("who", ["owner", "other", "stranger"])
def test_my_reports_lists_only_own(client, request, run, owner, who):
    ReportFactory(run=run, reporter=owner, text="secret report of alice")
    client.force_login(request.getfixturevalue(who))
    page = client.get("/me/reports/").content.decode()
    assert ("secret report of alice" in page) == (who == "owner")


def test_my_reports_needs_login(client):
    assert client.get("/me/reports/").status_code == 302


@pytest.mark.parametrize("count", [1, 10])
def test_my_reports_query_count(client, owner, django_assert_max_num_queries, count):
    from tests.factories import RunFactory

    for _ in range(count):
        ReportFactory(run=RunFactory(), reporter=owner, state="resolved", answer="done")
    client.force_login(owner)
    with django_assert_max_num_queries(3):
        assert client.get("/me/reports/").status_code == 200

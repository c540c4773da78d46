from __future__ import annotations

import pytest
from django.core import mail
from django.core.exceptions import ValidationError

from attestations import services
from attestations.models import ModerationEvent, Report
from tests.factories_attestations import make_staff


def test_report_create_emails_maintainers(run, owner, django_capture_on_commit_callbacks):
    make_staff("maint1")
    make_staff("maint2")
    with django_capture_on_commit_callbacks(execute=True):
        report = services.report_create(
            run=run, reporter=owner, category="broken_link", text="The link 404s."
        )
    assert report.state == "open"
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert sorted(message.to) == ["maint1@example.org", "maint2@example.org"]
    assert run.public_id in message.subject
    assert "The link 404s." in message.body
    assert f"/admin/attestations/report/{report.pk}/change/" in message.body


def test_report_needs_verified_unbanned_reporter(run, stranger):
    with pytest.raises(services.NotAllowed):
        services.report_create(run=run, reporter=stranger, category="other", text="x")
    assert not Report.objects.exists()


@pytest.mark.parametrize("category, text", [("nonsense", "x"), ("other", "   ")])
def test_report_validation(run, owner, category, text):
    with pytest.raises(ValidationError):
        services.report_create(run=run, reporter=owner, category=category, text=text)


def test_answer_flow(run, owner, staff):
    report = services.report_create(run=run, reporter=owner, category="other", text="odd")
    services.report_answer(report=report, maintainer=staff, state="triaged")
    with pytest.raises(ValidationError, match="answer"):
        services.report_answer(report=report, maintainer=staff, state="resolved", answer="")
    report = services.report_answer(
        report=report, maintainer=staff, state="resolved", answer="Fixed upstream."
    )
    assert (report.state, report.answer, report.answered_by) == (
        "resolved",
        "Fixed upstream.",
        staff,
    )
    trail = list(
        ModerationEvent.objects.filter(report=report)
        .order_by("pk")
        .values_list("from_state", "to_state")
    )
    assert trail == [("open", "triaged"), ("triaged", "resolved")]


def test_only_staff_answer(run, owner, other):
    report = services.report_create(run=run, reporter=owner, category="other", text="odd")
    with pytest.raises(services.NotAllowed):
        services.report_answer(report=report, maintainer=other, state="dismissed", answer="no")
    report.refresh_from_db()
    assert report.state == "open"

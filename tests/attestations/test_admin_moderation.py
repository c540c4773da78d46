"""Moderation in the Django admin: queues, bulk actions with a reason, bans, report answers,
the audit trail. The staff user has TOTP set up (the admin requires it)."""

from __future__ import annotations

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME

from attestations.models import Attestation, ModerationEvent, PosterBan, Report
from tests.factories import RunFactory
from tests.factories_attestations import AttestationFactory, ReportFactory, login_staff

CHANGELIST = "/admin/attestations/attestation/"


@pytest.fixture
def admin_client(client, staff):
    login_staff(client, staff)
    return client


def test_index_shows_queues(admin_client, run, owner):
    AttestationFactory.create_batch(3, run=run, author=owner)
    AttestationFactory(run=run, author=owner, state="approved")
    ReportFactory.create_batch(2, run=run, reporter=owner)
    ReportFactory(run=run, reporter=owner, state="resolved", answer="ok")
    page = admin_client.get("/admin/").content.decode()
    assert "Moderation queues" in page
    assert "Pending attestations</a></th><td>3</td>" in page
    assert "Open reports</a></th><td>2</td>" in page


def test_changelist_columns_filters_search(admin_client, run, owner, other):
    AttestationFactory(run=run, author=owner)
    AttestationFactory(run=RunFactory(), author=other)
    response = admin_client.get(CHANGELIST, {"state__exact": "pending"})
    page = response.content.decode()
    assert response.status_code == 200
    for column in ("run", "author", "measured median", "vs published"):
        assert column in page.lower()
    assert f'href="/runs/{run.public_id}/"' in page
    assert "+2.0 % vs published" in page
    found = admin_client.get(CHANGELIST, {"q": run.public_id}).context["cl"].result_count
    assert found == 1


@pytest.mark.parametrize("count", [2, 12])
def test_changelist_query_count(admin_client, owner, django_assert_max_num_queries, count):
    for _ in range(count):
        AttestationFactory(run=RunFactory(), author=owner)
    with django_assert_max_num_queries(12):
        assert admin_client.get(CHANGELIST).status_code == 200


def _inline_management(response) -> dict:
    """The inline formsets' hidden fields, as the browser would send them with the form."""
    data = {}
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        data[f"{formset.prefix}-TOTAL_FORMS"] = formset.total_form_count()
        data[f"{formset.prefix}-INITIAL_FORMS"] = formset.initial_form_count()
        for form in formset.initial_forms:
            data[f"{form.prefix}-id"] = form.instance.pk
    return data


def _action(admin_client, action, items, **extra):
    data = {"action": action, ACTION_CHECKBOX_NAME: [i.pk for i in items], **extra}
    return admin_client.post(CHANGELIST, data)


@pytest.mark.parametrize(
    "action, state, reason, asks, reports",
    [("approve", "approved", "", "Approve: add a note (optional)", "Approved 2 items."),
     ("reject", "rejected", "no source", "Reject: give a reason", "Rejected 2 items."),
     ("hide", "hidden", "spam", "Hide: give a reason", "Hid 2 items.")],
)  # fmt: skip
def test_bulk_moderation_with_intermediate_page(
    admin_client, run, owner, staff, action, state, reason, asks, reports
):
    items = AttestationFactory.create_batch(2, run=run, author=owner)
    page = _action(admin_client, action, items)
    assert page.status_code == 200
    # The page asks for what this action needs: a reason is optional only when approving.
    assert asks in page.content.decode()
    assert set(Attestation.objects.values_list("state", flat=True)) == {"pending"}

    done = _action(admin_client, action, items, apply="1", reason=reason)
    assert done.status_code == 302
    assert reports in admin_client.get(done["Location"]).content.decode()
    assert set(Attestation.objects.values_list("state", flat=True)) == {state}
    events = ModerationEvent.objects.filter(attestation__in=items)
    assert {(e.actor_id, e.to_state, e.reason) for e in events} == {(staff.pk, state, reason)}


def test_reject_without_reason_is_refused(admin_client, run, owner):
    items = AttestationFactory.create_batch(2, run=run, author=owner)
    page = _action(admin_client, "reject", items, apply="1", reason="")
    assert page.status_code == 200
    assert "Give a reason" in page.content.decode()
    assert set(Attestation.objects.values_list("state", flat=True)) == {"pending"}
    assert not ModerationEvent.objects.exists()


def test_ban_action(admin_client, run, owner, other):
    items = [AttestationFactory(run=run, author=owner), AttestationFactory(run=run, author=owner)]
    assert _action(admin_client, "ban_authors", items).status_code == 200
    assert not PosterBan.objects.exists()
    assert _action(admin_client, "ban_authors", items, apply="1", reason="spam").status_code == 302
    ban = PosterBan.objects.get()
    assert (ban.user, ban.reason) == (owner, "spam")
    assert ModerationEvent.objects.filter(action="ban", subject=owner).count() == 1
    # Lift it from the ban list.
    response = admin_client.post(
        "/admin/attestations/posterban/", {"action": "lift", ACTION_CHECKBOX_NAME: [ban.pk]}
    )
    assert response.status_code == 302
    assert not PosterBan.objects.active().exists()


def test_attestation_change_page_is_read_only_with_audit_trail(admin_client, run, owner, staff):
    item = AttestationFactory(run=run, author=owner, body="original")
    _action(admin_client, "hide", [item], apply="1", reason="duplicate post")
    page = admin_client.get(f"/admin/attestations/attestation/{item.pk}/change/").content.decode()
    assert "Audit trail" in page and "duplicate post" in page
    assert 'name="body"' not in page
    url = f"/admin/attestations/attestation/{item.pk}/change/"
    response = admin_client.post(
        url, {"body": "rewritten", "state": "approved", **_inline_management(admin_client.get(url))}
    )
    assert response.status_code == 302
    item.refresh_from_db()
    assert (item.body, item.state) == ("original", "hidden")


def test_audit_trail_cannot_be_edited_or_deleted(admin_client, run, owner, staff):
    item = AttestationFactory(run=run, author=owner)
    _action(admin_client, "approve", [item], apply="1", reason="")
    event = ModerationEvent.objects.get()
    assert admin_client.get("/admin/attestations/moderationevent/").status_code == 200
    response = admin_client.post(
        f"/admin/attestations/moderationevent/{event.pk}/change/", {"reason": "forged"}
    )
    assert response.status_code == 403
    response = admin_client.post(
        f"/admin/attestations/moderationevent/{event.pk}/delete/", {"post": "yes"}
    )
    assert response.status_code == 403
    event.refresh_from_db()
    assert event.reason == ""


def test_answer_report_in_admin(admin_client, run, owner, staff):
    report = ReportFactory(run=run, reporter=owner)
    url = f"/admin/attestations/report/{report.pk}/change/"
    page = admin_client.get(url).content.decode()
    assert 'name="answer"' in page and f'href="/runs/{run.public_id}/"' in page
    data = {"state": "resolved", "answer": "Corrected.", "text": "hacked"}
    response = admin_client.post(url, {**data, **_inline_management(admin_client.get(url))})
    assert response.status_code == 302
    report.refresh_from_db()
    assert (report.state, report.answer, report.answered_by, report.text) == (
        "resolved",
        "Corrected.",
        staff,
        "The p80 looks off.",
    )
    assert ModerationEvent.objects.filter(report=report, to_state="resolved").exists()


def test_resolving_without_answer_is_refused(admin_client, run, owner):
    report = ReportFactory(run=run, reporter=owner)
    url = f"/admin/attestations/report/{report.pk}/change/"
    data = {"state": "resolved", "answer": "", **_inline_management(admin_client.get(url))}
    response = admin_client.post(url, data, follow=True)
    assert "Give the reporter an answer" in response.content.decode()
    report.refresh_from_db()
    assert report.state == "open"
    assert not Report.objects.filter(state="resolved").exists()


def test_admin_login_goes_through_allauth(client, db):
    response = client.get("/admin/")
    assert response.status_code == 302
    login = client.get(response["Location"].replace("/admin/login/", "/admin/login/"), follow=True)
    assert login.redirect_chain[-1][0].startswith("/accounts/login/")


def test_non_staff_cannot_enter_admin(client, owner):
    client.force_login(owner)
    assert client.get("/admin/login/").status_code == 403
    assert client.get("/admin/").status_code == 302


def test_staff_without_totp_gets_no_admin_and_cannot_enrol_from_the_web(client, db):
    from tests.factories_attestations import make_staff

    staff = make_staff("newstaff", totp=False)
    client.force_login(staff)
    response = client.get("/admin/attestations/attestation/")
    assert response.status_code == 403
    assert "manage.py maintainer newstaff" in response.content.decode()
    # Enrolling from the web would turn the password alone into staff.
    response = client.get("/accounts/2fa/totp/activate/")
    assert response.status_code == 403
    assert not staff.authenticator_set.exists()


def test_ban_reporters_from_report_list(admin_client, run, owner):
    report = ReportFactory(run=run, reporter=owner)
    data = {"action": "ban_reporters", ACTION_CHECKBOX_NAME: [report.pk]}
    page = admin_client.post("/admin/attestations/report/", data)
    assert page.status_code == 200 and "alice" in page.content.decode()
    assert not PosterBan.objects.exists()
    done = admin_client.post(
        "/admin/attestations/report/", {**data, "apply": "1", "reason": "abuse"}
    )
    assert done.status_code == 302
    assert PosterBan.objects.active().get().user == owner

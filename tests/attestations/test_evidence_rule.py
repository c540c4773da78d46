"""The evidence rule: no write path of the community app, its API or the admin changes a run's
evidence level (only controlled reruns do). Each test sends something that would change it if
any path let it through, then checks the level is untouched."""

from __future__ import annotations

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from rest_framework.test import APIClient

from attestations import services
from runs.models import Evidence, Run
from tests.factories_attestations import AttestationFactory, ReportFactory, login_staff


def _evidence(run) -> str:
    return Run.objects.values_list("evidence", flat=True).get(pk=run.pk)


@pytest.fixture
def admin_client(client, staff):
    login_staff(client, staff)
    return client


def test_page_forms(client, run, owner):
    client.force_login(owner)
    sneaky = {"evidence": Evidence.REPRODUCED, "run__evidence": Evidence.REPRODUCED}
    client.post(
        f"/runs/{run.public_id}/attest/",
        {"kind": "reproduction", "median": "385.5", "input_unit": "us", **sneaky},
    )
    client.post(f"/runs/{run.public_id}/attest/", {"kind": "note", "body": "n", **sneaky})
    item = run.attestations.first()
    client.post(f"/attestations/{item.pk}/edit/", {"median": "1", "input_unit": "us", **sneaky})
    client.post(f"/attestations/{item.pk}/withdraw/", sneaky)
    client.post(f"/runs/{run.public_id}/report/", {"category": "wrong_data", "text": "x", **sneaky})
    assert run.attestations.count() == 2 and run.reports.count() == 1
    assert _evidence(run) == Evidence.REPORTED


def test_api(run, owner):
    api = APIClient()
    _, raw = services.token_create(user=owner, name="t")
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    sneaky = {"evidence": Evidence.REPRODUCED}
    measured = {"run": run.public_id, "kind": "reproduction", "median": 385536}
    # A field the endpoint does not take is refused by name, not dropped in silence.
    refused = api.post("/api/v1/attestations/", {**measured, **sneaky}, format="json")
    assert refused.status_code == 400 and "evidence" in str(refused.json()["body"])
    created = api.post("/api/v1/attestations/", measured, format="json")
    assert created.status_code == 201
    pk = created.json()["id"]
    patch = api.patch(f"/api/v1/attestations/{pk}/", {"body": "x", **sneaky}, format="json")
    assert patch.status_code == 400
    assert api.patch(f"/api/v1/attestations/{pk}/", {"body": "x"}, format="json").status_code == 200
    assert (
        api.post(f"/api/v1/attestations/{pk}/withdraw/", sneaky, format="json").status_code == 200
    )
    report = {"run": run.public_id, "category": "other", "text": "x"}
    assert api.post("/api/v1/reports/", {**report, **sneaky}, format="json").status_code == 400
    assert api.post("/api/v1/reports/", report, format="json").status_code == 201
    assert _evidence(run) == Evidence.REPORTED


@pytest.mark.parametrize("action", ["approve", "reject", "hide", "ban_authors"])
def test_admin_bulk_actions(admin_client, run, owner, action):
    items = AttestationFactory.create_batch(2, run=run, author=owner)
    response = admin_client.post(
        "/admin/attestations/attestation/",
        {
            "action": action,
            ACTION_CHECKBOX_NAME: [i.pk for i in items],
            "apply": "1",
            "reason": "because",
            "evidence": Evidence.INCORRECT,
        },
    )
    assert response.status_code == 302
    assert _evidence(run) == Evidence.REPORTED


@pytest.mark.parametrize("action", ["mark_triaged", "ban_reporters"])
def test_admin_report_actions(admin_client, run, owner, action):
    report = ReportFactory(run=run, reporter=owner)
    response = admin_client.post(
        "/admin/attestations/report/",
        {
            "action": action,
            ACTION_CHECKBOX_NAME: [report.pk],
            "apply": "1",
            "reason": "because",
            "evidence": Evidence.INCORRECT,
        },
    )
    assert response.status_code == 302
    assert _evidence(run) == Evidence.REPORTED


def test_admin_report_answer(admin_client, run, owner):
    report = ReportFactory(run=run, reporter=owner)
    url = f"/admin/attestations/report/{report.pk}/change/"
    response = admin_client.post(
        url,
        {
            "state": "resolved",
            "answer": "Wrong indeed.",
            "evidence": Evidence.INCORRECT,
            "events-TOTAL_FORMS": "0",
            "events-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302
    report.refresh_from_db()
    assert report.state == "resolved"
    assert _evidence(run) == Evidence.REPORTED


def test_run_admin_change_form(admin_client, run):
    url = f"/admin/runs/run/{run.pk}/change/"
    page = admin_client.get(url)
    assert page.status_code == 200
    # The field is not in the form at all, so no POST can set it.
    assert "evidence" not in page.context["adminform"].form.fields
    assert "evidence" in page.context["adminform"].readonly_fields
    assert 'name="evidence"' not in page.content.decode()
    admin_client.post(url, {"evidence": Evidence.REPRODUCED})
    assert _evidence(run) == Evidence.REPORTED


def test_run_admin_actions(admin_client, run):
    """Every bulk action the run admin offers (other apps may add some) leaves evidence alone."""
    page = admin_client.get("/admin/runs/run/")
    assert page.status_code == 200
    assert run.public_id in page.content.decode()
    action_form = page.context["action_form"]
    names = [n for n, _ in action_form.fields["action"].choices if n] if action_form else []
    for name in names:
        if name == "delete_selected":
            continue
        admin_client.post(
            "/admin/runs/run/",
            {"action": name, ACTION_CHECKBOX_NAME: [run.pk], "apply": "1", "post": "yes"},
        )
        assert _evidence(run) == Evidence.REPORTED, name

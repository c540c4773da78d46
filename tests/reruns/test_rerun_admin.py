"""Maintainers in the admin: approve requests, order reruns on many runs, see the logs."""

from __future__ import annotations

import pytest

from reruns.models import JobState, RerunJob
from reruns.services import rerun_request
from tests.factories import RunFactory
from tests.factories_attestations import login_staff, make_staff


@pytest.fixture(autouse=True)
def _no_broker(settings):
    settings.CELERY_BROKER_URL = None


@pytest.fixture
def maintainer(client, db):
    """A superuser with a verified address and TOTP set up: what the admin requires."""
    user = make_staff()
    login_staff(client, user)
    return user


def test_approve_action_queues_requests(
    client, maintainer, bob, django_capture_on_commit_callbacks
):
    job = rerun_request(run=RunFactory(), requested_by=bob)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/admin/reruns/rerunjob/",
            {"action": "approve", "_selected_action": [job.pk]},
            follow=True,
        )
    assert "1 job(s) approved." in response.content.decode()
    job.refresh_from_db()
    assert job.state == JobState.QUEUED and job.approved_by == maintainer
    assert job.dispatch_error == "no broker configured: jobs wait as queued"


def test_order_controlled_rerun_on_many_runs(client, maintainer):
    runs = [RunFactory(), RunFactory()]
    response = client.post(
        "/admin/runs/run/",
        {"action": "order_controlled_rerun", "_selected_action": [r.pk for r in runs]},
        follow=True,
    )
    body = response.content.decode().lower()  # the admin capitalises messages
    assert "2 rerun(s) ordered." in body
    assert "no broker configured: jobs wait as queued" in body
    assert set(RerunJob.objects.values_list("state", flat=True)) == {JobState.QUEUED}
    # Ordering again reports the open jobs instead of making duplicates.
    response = client.post(
        "/admin/runs/run/",
        {"action": "order_controlled_rerun", "_selected_action": [r.pk for r in runs]},
        follow=True,
    )
    assert "already open" in response.content.decode()
    assert RerunJob.objects.count() == 2


def test_job_list_says_when_there_is_no_broker(client, maintainer):
    body = client.get("/admin/reruns/rerunjob/").content.decode().lower()
    assert "no broker configured: jobs wait as queued" in body
    assert client.get("/admin/reruns/rerunjob/add/").status_code == 403
    assert client.get("/admin/reruns/rejectedresult/").status_code == 200


def test_jobs_are_read_only_in_the_admin(client, maintainer, bob):
    """A queued job cannot be edited onto another run, GPU class or mode: only actions act."""
    job = rerun_request(run=RunFactory(), requested_by=bob)
    other = RunFactory()
    url = f"/admin/reruns/rerunjob/{job.pk}/change/"
    page = client.get(url).content.decode()
    for field in ("run", "gpu_class", "offline", "max_attempts", "state"):
        assert f'name="{field}"' not in page
    client.post(url, {"run": other.pk, "gpu_class": "cpu", "offline": "on", "max_attempts": 9})
    job.refresh_from_db()
    assert job.run_id != other.pk and job.max_attempts == 3 and not job.offline

"""The run page's rerun section and the request view."""

from __future__ import annotations

import pytest
from django.test import Client

from reruns.models import JobState, RerunJob
from reruns.services import result_record
from tests.factories import RunFactory
from tests.factories_attestations import login_staff
from tests.factories_reruns import TEST_KEYS, double_result, job_for, sign


@pytest.fixture(autouse=True)
def _no_broker(settings):
    settings.CELERY_BROKER_URL = None
    settings.KERNELINDEX_WORKER_KEYS = TEST_KEYS


@pytest.fixture
def run(db):
    return RunFactory()


def _url(run):
    return f"/runs/{run.public_id}/reruns/"


def test_anonymous_sees_the_section_and_no_form(client, run):
    page = client.get(run.get_absolute_url()).content.decode()
    assert "No controlled reruns yet." in page
    # No job waits and no form is offered: the broker's absence concerns nobody here.
    assert "No broker configured" not in page
    assert "Log in</a> to request a controlled rerun" in page
    assert _url(run) not in page
    response = client.post(_url(run), {"gpu_class": "h100"})
    assert response.status_code == 302 and "login" in response["Location"]
    assert not RerunJob.objects.exists()


def test_user_requests_and_staff_orders(client, run, bob, alice):
    client.force_login(bob)
    page = client.get(run.get_absolute_url()).content.decode()
    assert "Request a controlled rerun" in page
    response = client.post(_url(run), {"gpu_class": "h200"}, follow=True)
    assert "a maintainer will review it" in response.content.decode()
    job = RerunJob.objects.get()
    assert (job.state, job.gpu_class, job.requested_by) == (JobState.AWAITING_APPROVAL, "h200", bob)

    alice.is_staff = True
    alice.save()
    login_staff(client, alice)
    assert "Order rerun" in client.get(run.get_absolute_url()).content.decode()
    response = client.post(_url(run), {"gpu_class": "h100"}, follow=True)
    body = response.content.decode()
    assert "Rerun ordered; it waits as queued." in body
    # Why it waits is said once, above the jobs, not per job, form and message.
    assert body.lower().count("no broker configured") == 1
    assert RerunJob.objects.get(gpu_class="h100").state == JobState.QUEUED
    # The page lists both jobs with their states.
    assert "Awaiting approval" in body and "Queued" in body


def test_bad_input_is_a_message_not_an_error(client, run, bob):
    client.force_login(bob)
    response = client.post(_url(run), {"gpu_class": "tpu-v9"}, follow=True)
    assert response.status_code == 200
    assert "Choose one of the listed GPU classes." in response.content.decode()
    client.post(_url(run), {"gpu_class": "h100"})
    response = client.post(_url(run), {"gpu_class": "h100"}, follow=True)
    assert "already open" in response.content.decode()
    assert client.post("/runs/ffffffff/reruns/", {"gpu_class": "h100"}).status_code == 404
    assert client.get(_url(run)).status_code == 405


def test_csrf_is_required(run, bob):
    client = Client(enforce_csrf_checks=True)
    client.force_login(bob)
    assert client.post(_url(run), {"gpu_class": "h100"}).status_code == 403
    assert not RerunJob.objects.exists()
    # The page's own form carries a working token.
    import re

    page = client.get(run.get_absolute_url()).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    response = client.post(_url(run), {"gpu_class": "h100", "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert RerunJob.objects.get().requested_by == bob


def test_recorded_result_and_evidence_history_are_shown(client, run):
    job = job_for(run)
    receipt = result_record(envelope=sign(double_result(job)))
    page = client.get(run.get_absolute_url()).content.decode()
    assert f'id="rerun-{job.uuid}"' in page
    assert "Succeeded" in page and "cpu · ok" in page
    assert f"{len(receipt.payload['measurement']['samples'])} do_bench samples" in page
    assert 'class="badge evidence evidence-checked"' in page
    assert "Reported → Checked" in page
    # The reason is on the page, beside the level.
    assert "a CPU result can check correctness but never reproduce a GPU run" in page


def test_a_finished_offline_job_reads_in_order(client, run, settings):
    """A job run from an exported file and recorded: no "attempt 0 of 3", issued before it
    started, and no no-broker notice above a job that no longer waits."""
    from datetime import timedelta

    from reruns.services import result_record
    from tests.factories_reruns import TEST_KEYS, double_result, job_for, sign

    settings.KERNELINDEX_WORKER_KEYS = TEST_KEYS
    job = job_for(run, offline=True)
    # Loaded from a batch folder: the row is created after the job was issued and run.
    RerunJob.objects.filter(pk=job.pk).update(issued_at=job.created_at - timedelta(days=1))
    job.refresh_from_db()
    envelope = double_result(job)
    envelope["payload"]["startedAt"] = (job.issued_at + timedelta(hours=1)).strftime(
        "%Y-%m-%dT%H:%M:%S.000000Z"
    )
    result_record(envelope=sign(envelope), via="import")
    page = client.get(run.get_absolute_url()).content.decode()
    assert "run offline from an exported job file" in page and "attempt 0" not in page
    assert "No broker configured" not in page
    issued = job.issued_at.strftime("issued %Y-%m-%d %H:%M")
    started = (job.issued_at + timedelta(hours=1)).strftime("started %Y-%m-%d %H:%M")
    assert page.index(issued) < page.index(started)

"""Watch emails link to where the site is served: SITE_ROOT; under DEBUG with it unset, the
origin of the request that caused them (carried to the task), and from `manage.py ingest`
its --site-root, the command saying which origin it uses and why."""

from __future__ import annotations

import io
import re

import pytest
from django.core import mail
from django.core.management import CommandError, call_command

from attestations import tasks
from attestations.models import Watch
from attestations.watching import receivers
from attestations.watching.services import watch_start
from kilib.origin import links_origin, site_root
from runs.models import Publication, Source
from runs.sources.pipeline import ingest
from tests.synthetic_ci import suite_cells, write_history

pytestmark = pytest.mark.django_db

EVERYTHING = dict.fromkeys(Watch.EVENTS, True)


@pytest.fixture
def watched(tmp_path, settings, alice):
    """Ten CI runs in, alice watching the source, runs 10 and 11 written but not imported;
    DEBUG with SITE_ROOT unset, no broker."""
    settings.DEBUG = True
    settings.SITE_ROOT_CONFIGURED = False
    settings.CELERY_BROKER_URL = None
    cells = suite_cells()
    write_history(tmp_path, {k: v[:10] for k, v in cells.items()})
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])
    source = Source.objects.get(slug="liger-kernel-ci")
    watch_start(user=alice, target="source", source=source, events=EVERYTHING)
    write_history(tmp_path, cells, first=10)
    return tmp_path


def _origins(body: str) -> set[str]:
    return set(re.findall(r"(https?://[^/\s]+)/", body))


def _ingest(path, *options):
    """The command as it runs: its writes commit, and the notices go out, inside it."""
    err = io.StringIO()
    call_command("ingest", "liger-kernel-ci", str(path), "--no-progress", *options,
                 stdout=io.StringIO(), stderr=err)  # fmt: skip
    return err.getvalue()


@pytest.mark.django_db(transaction=True)
def test_ingest_links_emails_to_its_site_root_and_says_so(watched):
    said = _ingest(watched, "--site-root", "http://demo.example:8080/")
    assert "Links in watch emails: http://demo.example:8080 (from --site-root)." in said
    (email,) = mail.outbox
    assert "New publication" in email.body
    assert "Own kernel" in email.body and ": 1.000 ms → 2.000 ms" in email.body  # in units
    assert _origins(email.body) == {"http://demo.example:8080"}
    assert email.extra_headers["List-Unsubscribe"].startswith("<http://demo.example:8080/")


@pytest.mark.django_db(transaction=True)
def test_ingest_without_site_root_names_the_default_it_falls_back_to(watched, settings):
    said = _ingest(watched)
    assert f"Links in watch emails: {settings.SITE_ROOT} (SITE_ROOT is unset" in said
    assert "set SITE_ROOT or pass --site-root" in said
    (email,) = mail.outbox
    assert _origins(email.body) == {settings.SITE_ROOT}


def test_a_bad_site_root_is_refused_before_anything_is_imported(watched):
    for bad in ["demo.example:8080", "http://demo.example/kernelindex", "ftp://x"]:
        with pytest.raises(CommandError, match="--site-root"):
            call_command("ingest", "liger-kernel-ci", str(watched), "--site-root", bad,
                         stdout=io.StringIO(), stderr=io.StringIO())  # fmt: skip
    assert not Publication.objects.filter(slug="000000a").exists()
    assert not mail.outbox


def test_a_notice_task_carries_the_served_origin_to_the_worker(watched, settings):
    """Under DEBUG a request's links follow the host it came to; the task it dispatches runs
    where there is no request, and builds its links from the origin it was given."""
    sent = {}

    class Task:
        name = "t"

        def run(self, **kwargs):
            sent.update(kwargs)

    with links_origin("http://served.example:9000"):  # as SiteOriginMiddleware sets it
        receivers.dispatch(Task(), event_id=1)
    assert sent == {"event_id": 1, "origin": "http://served.example:9000"}
    assert site_root() == settings.SITE_ROOT  # nothing leaks out of the block
    ingest(source_slug="liger-kernel-ci", locations=[str(watched)])
    source = Source.objects.get(slug="liger-kernel-ci")
    publications = list(Publication.objects.filter(source=source, slug__in=["000000a"]))
    tasks.notices_sync.run(
        batch="b1", source_id=source.pk, publication_ids=[p.pk for p in publications],
        step_ids=[], origin="http://served.example:9000",
    )  # fmt: skip
    (email,) = mail.outbox
    assert _origins(email.body) == {"http://served.example:9000"}

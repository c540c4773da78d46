"""Watching: a sync that brings new publications sends one batched email per watcher, none
when repeated, none after the unsubscribe link; the link refuses a tampered token; feeds,
evidence moves and approved attestations reach watchers too."""

from __future__ import annotations

import re

import pytest
from django.core import mail

from attestations.models import Notice, Watch
from attestations.services import attestation_moderate
from attestations.watching.services import unsubscribe_token, watch_start
from runs.evidence import Outcome, evidence_apply
from runs.models import Benchmark, Run, Source
from runs.sources.pipeline import ingest
from runs.sources.sync import source_sync
from tests.factories_attestations import AttestationFactory, make_staff
from tests.synthetic_ci import commit, suite_cells, write_history

pytestmark = pytest.mark.django_db

EVERYTHING = dict.fromkeys(Watch.EVENTS, True)


@pytest.fixture
def upstream(tmp_path, settings):
    """Ten CI runs already in; sync configured on the folder, which gets runs 10 and 11."""
    settings.CELERY_BROKER_URL = None  # notice tasks run in-process, as without a broker
    settings.SOURCE_SYNC = {"liger-kernel-ci": {"locations": [str(tmp_path)], "timeout": 5}}
    cells = suite_cells()
    write_history(tmp_path, {k: v[:10] for k, v in cells.items()})
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])

    def publish(upto: int):
        write_history(tmp_path, {k: v[:upto] for k, v in cells.items()}, first=upto - 2)

    return publish


def _watchers(alice, bob):
    own = Benchmark.objects.get(slug="own_kernel")
    watch_start(user=alice, target="benchmark", benchmark=own, events=EVERYTHING)
    source = Source.objects.get(slug="liger-kernel-ci")
    watch_start(user=bob, target="source", source=source, events=EVERYTHING)
    run = Run.objects.public().filter(benchmark__slug="suite_0").first()
    watch_start(user=bob, target="cell", run=run, events=EVERYTHING)


def test_one_email_per_watcher_per_sync_none_when_repeated(
    upstream, alice, bob, django_capture_on_commit_callbacks
):
    _watchers(alice, bob)
    upstream(12)
    with django_capture_on_commit_callbacks(execute=True):
        source_sync(slug="liger-kernel-ci")
    assert sorted(m.to[0] for m in mail.outbox) == ["alice@example.org", "bob@example.org"]
    to_alice = next(m for m in mail.outbox if m.to == ["alice@example.org"])
    # Both new publications and the regression their arrival confirmed, in one email.
    assert f"New publication {commit(10)}" in to_alice.body
    assert f"New publication {commit(11)}" in to_alice.body
    assert f"Regression +100 % at {commit(9)}: Own kernel" in to_alice.body
    assert to_alice.extra_headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    to_bob = next(m for m in mail.outbox if m.to == ["bob@example.org"])
    assert to_bob.body.count(f"New publication {commit(10)}") == 1  # two watches, one notice
    with django_capture_on_commit_callbacks(execute=True):
        source_sync(slug="liger-kernel-ci")
    assert len(mail.outbox) == 2


def test_the_same_batch_delivered_twice_sends_once(upstream, alice, bob):
    from attestations.watching.services import notices_for_sync

    _watchers(alice, bob)
    source = Source.objects.get(slug="liger-kernel-ci")
    pubs = list(source.publications.values_list("id", flat=True)[:2])
    kwargs = {"batch": "b1", "source_id": source.pk, "publication_ids": pubs, "step_ids": []}
    assert notices_for_sync(**kwargs) == 2
    assert notices_for_sync(**kwargs) == 0
    assert notices_for_sync(**{**kwargs, "batch": "b2"}) == 0  # told already, in any batch
    assert len(mail.outbox) == 2


def test_nothing_after_unsubscribing_by_the_emailed_link(
    upstream, client, alice, bob, django_capture_on_commit_callbacks
):
    _watchers(alice, bob)
    upstream(11)
    with django_capture_on_commit_callbacks(execute=True):
        source_sync(slug="liger-kernel-ci")
    to_alice = next(m for m in mail.outbox if m.to == ["alice@example.org"])
    link = re.search(r"http://\S+/watching/unsubscribe/(\S+)/", to_alice.body).group(0)
    path = link.split("://", 1)[1].split("/", 1)[1]
    page = client.get(f"/{path}")  # a GET changes nothing (scanners follow links)
    assert page.status_code == 200 and Watch.objects.filter(user=alice).exists()
    assert client.post(f"/{path}").status_code == 200  # no login, no CSRF token needed
    assert not Watch.objects.filter(user=alice).exists()
    mail.outbox.clear()
    upstream(12)
    with django_capture_on_commit_callbacks(execute=True):
        source_sync(slug="liger-kernel-ci")
    assert [m.to for m in mail.outbox] == [["bob@example.org"]]


@pytest.mark.parametrize("tamper", ["flip", "other-user", "truncate"])
def test_a_tampered_unsubscribe_link_is_refused(client, alice, bob, tamper):
    source = Source.objects.create(slug="s", name="S")
    watch = watch_start(user=alice, target="source", source=source, events=EVERYTHING)
    token = unsubscribe_token(user=alice, watch=watch)
    if tamper == "flip":
        token = token[:-1] + ("A" if token[-1] != "A" else "B")
    elif tamper == "other-user":
        payload, rest = token.split(":", 1)
        token = unsubscribe_token(user=bob, watch=watch).split(":", 1)[0] + ":" + rest
    else:
        token = token[: len(token) // 2]
    for response in (client.get(f"/watching/unsubscribe/{token}/"),
                     client.post(f"/watching/unsubscribe/{token}/")):  # fmt: skip
        assert response.status_code == 400
        assert "This link is not valid" in response.content.decode()
    assert Watch.objects.filter(pk=watch.pk).exists()


def test_watch_pages_start_list_and_stop(client, alice, bob, tmp_path):
    write_history(tmp_path, {("own_kernel", "liger"): [1.0] * 6})
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])
    run = Run.objects.public().first()
    assert client.get(f"/me/watching/new/?cell={run.public_id}").status_code == 302  # login
    client.force_login(alice)
    page = client.get(f"/runs/{run.public_id}/").content.decode()
    assert f"/me/watching/new/?cell={run.public_id}" in page
    response = client.post(f"/me/watching/new/?cell={run.public_id}", {"regressions": "on"})
    assert response.status_code == 302
    watch = Watch.objects.get(user=alice)
    assert (watch.target, watch.regressions, watch.publications) == ("cell", True, False)
    assert client.post("/me/watching/new/?benchmark=own_kernel", {}).status_code == 200  # none
    listing = client.get("/me/watching/").content.decode()
    assert f"The cell of run {run.public_id}" in listing
    assert f"/feeds/runs/{run.public_id}/changes.atom" in listing
    client.force_login(bob)
    assert client.post(f"/me/watching/{watch.pk}/stop/").status_code == 404
    client.force_login(alice)
    client.post(f"/me/watching/{watch.pk}/stop/")
    assert not Watch.objects.exists()


def test_the_changes_feeds(client, upstream, settings):
    upstream(12)
    source_sync(slug="liger-kernel-ci")
    feed = client.get("/feeds/benchmarks/own_kernel/changes.atom")
    assert feed.status_code == 200 and feed["Content-Type"].startswith("application/atom+xml")
    body = feed.content.decode()
    assert body.count("<entry>") == 1 and f"Regression +100 % at {commit(9)}" in body
    suite = client.get("/feeds/sources/liger-kernel-ci/changes.atom").content.decode()
    assert suite.count("<entry>") == 13  # 12 host-shifted cells and the kernel's own
    assert "likely the benchmark host" in suite
    run = Run.objects.public().filter(benchmark__slug="suite_1").first()
    cell = client.get(f"/feeds/runs/{run.public_id}/changes.atom").content.decode()
    assert cell.count("<entry>") == 1
    assert client.get("/feeds/runs/zz/changes.atom").status_code == 404


def test_evidence_moves_and_approved_attestations_reach_watchers(
    alice, settings, django_capture_on_commit_callbacks
):
    settings.CELERY_BROKER_URL = None
    from tests.factories import RunFactory

    run = RunFactory()
    run = Run.objects.select_related("group", "implementation").get(pk=run.pk)
    watch_start(user=alice, target="cell", run=run, events=EVERYTHING)
    with django_capture_on_commit_callbacks(execute=True):
        evidence_apply(run=run, controlled_run=None, outcome=Outcome("checked"), cause="test")
    assert len(mail.outbox) == 1 and "evidence reported → checked" in mail.outbox[0].body
    with django_capture_on_commit_callbacks(execute=True):
        evidence_apply(run=run, controlled_run=None, outcome=Outcome("checked"), cause="again")
    assert len(mail.outbox) == 1  # the level did not move
    item = AttestationFactory(run=run, author=make_staff("carol"))
    with django_capture_on_commit_callbacks(execute=True):
        attestation_moderate(attestations=[item], moderator=make_staff(), state="approved")
    assert len(mail.outbox) == 2 and "New reproduction by carol" in mail.outbox[1].body
    assert Notice.objects.filter(user=alice).count() == 2


def test_a_level_moved_with_nobody_watching_evidence_costs_one_query(
    alice, settings, django_capture_on_commit_callbacks, django_assert_num_queries
):
    from attestations.watching.services import notices_for_evidence
    from tests.factories import RunFactory

    settings.CELERY_BROKER_URL = None
    run = Run.objects.select_related("group", "implementation").get(pk=RunFactory().pk)
    watch_start(user=alice, target="cell", run=run, events={**EVERYTHING, "evidence": False})
    with django_capture_on_commit_callbacks(execute=False) as hooks:
        evidence_apply(run=run, controlled_run=None, outcome=Outcome("checked"), cause="test")
    event = run.evidence_events.get()
    with django_assert_num_queries(1):
        assert notices_for_evidence(event_id=event.pk) == 0
    Watch.objects.update(evidence=True)
    assert notices_for_evidence(event_id=event.pk) == 1  # once watched, delivered
    assert len(hooks) >= 1 and len(mail.outbox) == 1

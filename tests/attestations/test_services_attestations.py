from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ValidationError

from attestations import services
from attestations.models import Attestation, ModerationEvent, PosterBan
from attestations.services import Measurement
from tests.factories_attestations import AttestationFactory


def _repro(run, author, **kw):
    return services.attestation_create(
        run=run,
        author=author,
        kind="reproduction",
        measurement=Measurement(median=390_000, p20=389_000, p80=391_000, unit="ns"),
        **kw,
    )


def test_create_starts_pending(run, owner):
    item = _repro(run, owner, driver_version="570.86", body="hello", gpu=run.environment.gpu)
    assert item.state == "pending"
    assert item.author == owner
    assert (item.median, item.p20, item.p80, item.unit) == (390_000, 389_000, 391_000, "ns")
    assert item.delta_percent() == pytest.approx((390_000 - 385_536) * 100 / 385_536)


def test_unverified_user_cannot_post(run, stranger):
    with pytest.raises(services.NotAllowed, match="Verify your email"):
        _repro(run, stranger)
    assert not Attestation.objects.exists()


def test_banned_user_cannot_post(run, owner, staff):
    services.poster_ban(user=owner, moderator=staff, reason="spam")
    with pytest.raises(services.NotAllowed, match="may not post"):
        _repro(run, owner)
    services.poster_unban(user=owner, moderator=staff)
    assert _repro(run, owner).pk
    assert list(ModerationEvent.objects.filter(subject=owner).values_list("action", flat=True)) == [
        "unban",
        "ban",
    ]


def test_ban_twice_keeps_one_active_ban(owner, staff):
    first = services.poster_ban(user=owner, moderator=staff, reason="spam")
    second = services.poster_ban(user=owner, moderator=staff, reason="again")
    assert first.pk == second.pk
    assert PosterBan.objects.active().count() == 1


@pytest.mark.parametrize(
    "measurement, field",
    [
        (Measurement(median=None, unit="ns"), "median"),
        (Measurement(median=100, p20=200, p80=300, unit="ns"), "median"),
        (Measurement(median=-5, unit="ns"), "median"),
        (Measurement(median=100, unit="B"), "unit"),
    ],
)
def test_reproduction_needs_consistent_values(run, owner, measurement, field):
    with pytest.raises(ValidationError) as exc:
        services.attestation_create(
            run=run, author=owner, kind="reproduction", measurement=measurement
        )
    assert field in exc.value.message_dict


def test_note_needs_text_and_no_values(run, owner):
    with pytest.raises(ValidationError):
        services.attestation_create(run=run, author=owner, kind="note", body="  ")
    with pytest.raises(ValidationError):
        services.attestation_create(
            run=run, author=owner, kind="note", body="x", measurement=Measurement(1, unit="ns")
        )
    note = services.attestation_create(run=run, author=owner, kind="note", body="A note")
    assert note.median is None and note.unit == ""


def test_body_size_limit(run, owner, settings):
    settings.COMMUNITY_MAX_BODY_CHARS = 10
    with pytest.raises(ValidationError, match="At most 10"):
        services.attestation_create(run=run, author=owner, kind="note", body="x" * 11)


def test_update_only_by_author_and_while_pending(run, owner, other, staff):
    item = _repro(run, owner)
    with pytest.raises(services.NotAllowed):
        services.attestation_update(attestation=item, editor=other, body="mine now")
    services.attestation_update(attestation=item, editor=owner, body="edited")
    item.refresh_from_db()
    assert item.body == "edited"
    services.attestation_moderate(attestations=[item], moderator=staff, state="approved", reason="")
    item.refresh_from_db()
    with pytest.raises(services.WrongState):
        services.attestation_update(attestation=item, editor=owner, body="after approval")


def test_update_cannot_touch_state_or_run(run, owner):
    item = _repro(run, owner)
    with pytest.raises(ValidationError, match="Not editable"):
        services.attestation_update(attestation=item, editor=owner, state="approved")
    item.refresh_from_db()
    assert item.state == "pending"


def test_update_sees_moderation_that_happened_meanwhile(run, owner, staff):
    item = _repro(run, owner)
    stale = Attestation.objects.get(pk=item.pk)
    services.attestation_moderate(
        attestations=[item], moderator=staff, state="rejected", reason="no"
    )
    with pytest.raises(services.WrongState):
        services.attestation_update(attestation=stale, editor=owner, body="sneaky")
    item.refresh_from_db()
    assert item.body != "sneaky"


def test_withdraw(run, owner, other):
    item = _repro(run, owner)
    with pytest.raises(services.NotAllowed):
        services.attestation_withdraw(attestation=item, user=other)
    services.attestation_withdraw(attestation=item, user=owner)
    item.refresh_from_db()
    assert item.state == "withdrawn"
    with pytest.raises(services.WrongState):
        services.attestation_withdraw(attestation=item, user=owner)


def test_moderate_records_audit_trail(run, owner, staff):
    items = [AttestationFactory(run=run, author=owner) for _ in range(3)]
    changed = services.attestation_moderate(
        attestations=items, moderator=staff, state="hidden", reason="off-topic"
    )
    assert changed == 3
    events = ModerationEvent.objects.filter(attestation__in=items)
    assert {(e.actor, e.from_state, e.to_state, e.reason) for e in events} == {
        (staff, "pending", "hidden", "off-topic")
    }
    assert set(Attestation.objects.values_list("state", "moderated_by")) == {("hidden", staff.pk)}


def test_moderate_skips_withdrawn_and_unchanged(run, owner, staff):
    withdrawn = AttestationFactory(run=run, author=owner, state="withdrawn")
    approved = AttestationFactory(run=run, author=owner, state="approved")
    pending = AttestationFactory(run=run, author=owner)
    changed = services.attestation_moderate(
        attestations=[withdrawn, approved, pending], moderator=staff, state="approved"
    )
    assert changed == 1
    withdrawn.refresh_from_db()
    assert withdrawn.state == "withdrawn"


def test_moderate_rules(run, owner, other, staff):
    item = AttestationFactory(run=run, author=owner)
    with pytest.raises(services.NotAllowed):
        services.attestation_moderate(attestations=[item], moderator=other, state="approved")
    with pytest.raises(ValidationError, match="reason"):
        services.attestation_moderate(attestations=[item], moderator=staff, state="rejected")
    with pytest.raises(ValidationError):
        services.attestation_moderate(attestations=[item], moderator=staff, state="withdrawn")
    item.refresh_from_db()
    assert item.state == "pending"
    assert not ModerationEvent.objects.exists()


def test_moderation_events_are_append_only(run, owner, staff):
    item = AttestationFactory(run=run, author=owner)
    services.attestation_moderate(attestations=[item], moderator=staff, state="approved")
    event = ModerationEvent.objects.get()
    event.reason = "rewritten"
    with pytest.raises(ValueError):
        event.save()
    with pytest.raises(ValueError):
        event.delete()
    assert ModerationEvent.objects.get().reason == ""


def test_visible_to(run, owner, other):
    mine = AttestationFactory(run=run, author=owner)
    approved = AttestationFactory(run=run, author=other, state="approved")
    AttestationFactory(run=run, author=other)  # bob's pending
    AttestationFactory(run=run, author=owner, state="hidden")
    assert set(Attestation.objects.visible_to(owner)) == {mine, approved}
    assert set(Attestation.objects.visible_to(AnonymousUser())) == {approved}


@pytest.mark.parametrize("url", ["javascript:alert(1)", "ftp://example.org/x", "data:text/html,x"])
def test_commit_url_must_be_a_web_link(run, owner, url):
    with pytest.raises(ValidationError) as exc:
        _repro(run, owner, commit_url=url)
    assert "commit_url" in exc.value.message_dict
    item = _repro(run, owner, commit_url="https://github.com/o/r/commit/abc")
    with pytest.raises(ValidationError):
        services.attestation_update(attestation=item, editor=owner, commit_url=url)

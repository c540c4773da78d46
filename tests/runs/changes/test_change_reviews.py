"""A maintainer acknowledges or dismisses a detected change in the admin (issue 44): the review
is kept per cell and publication, so a re-detection keeps it; it is in the moderation trail; a
dismissed change is shown as such and left out of the feeds and notices."""

from __future__ import annotations

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME

from attestations.models import ModerationEvent
from runs.changes.models import CellChange, ChangeReview
from runs.changes.services import changes_detect
from runs.models import Source
from runs.sources.pipeline import ingest
from tests.factories_attestations import login_staff, make_staff
from tests.pages import text_of
from tests.synthetic_ci import commit, suite_cells, write_history

pytestmark = pytest.mark.django_db

ADMIN = "/admin/runs/cellchange/"
FEED = "/feeds/sources/liger-kernel-ci/changes.atom"


@pytest.fixture
def history(tmp_path, settings):
    settings.PAGE_CACHE_SECONDS = 0
    write_history(tmp_path, suite_cells())
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])


def _own_step() -> CellChange:
    return CellChange.objects.get(benchmark__slug="own_kernel", provider_key="liger", kind="step")


def _post(client, action: str, change: CellChange, reason: str = ""):
    return client.post(
        ADMIN,
        {"action": action, ACTION_CHECKBOX_NAME: [change.pk], "apply": "1", "reason": reason},
    )


def test_a_dismissed_change_is_kept_in_the_trail_shown_and_not_alarmed(client, history):
    maintainer = make_staff()
    login_staff(client, maintainer)
    change = _own_step()
    assert "Own kernel" in client.get(FEED).content.decode()
    response = _post(client, "dismiss", change, "the benchmark's input changed upstream")
    assert response.status_code == 302
    review = ChangeReview.objects.get()
    assert (review.state, review.reviewed_by, review.publication.slug) == (
        "dismissed", maintainer, commit(9)
    )  # fmt: skip
    event = ModerationEvent.objects.get(change_review=review)
    assert (event.actor, event.action, event.from_state, event.to_state, event.reason) == (
        maintainer, "change dismissed", "", "dismissed", "the benchmark's input changed upstream"
    )  # fmt: skip
    client.logout()
    page = text_of(client.get("/sources/liger-kernel-ci/changes/"))
    assert "Own kernel" in page and "dismissed by a maintainer" in page
    assert "Own kernel" not in client.get(FEED).content.decode()
    api = client.get("/api/v1/changes/?benchmark=own_kernel&kind=step").json()["results"]
    assert [c["review"] for c in api] == ["dismissed"]
    assert not CellChange.objects.filter(pk=change.pk).alarmed().exists()


def test_a_redetection_keeps_the_review_and_acknowledging_moves_it(client, history):
    maintainer = make_staff()
    login_staff(client, maintainer)
    _post(client, "dismiss", _own_step(), "a host change")
    old_pk = _own_step().pk
    changes_detect(source=Source.objects.get(slug="liger-kernel-ci"))
    again = _own_step()
    assert again.pk != old_pk  # the rows were replaced
    assert again.review == "dismissed"
    assert _post(client, "acknowledge", again).status_code == 302
    assert ChangeReview.objects.get().state == "acknowledged"
    assert _own_step().review == "acknowledged"
    trail = ModerationEvent.objects.filter(change_review__isnull=False).order_by("pk")
    assert [(e.from_state, e.to_state) for e in trail] == [
        ("", "dismissed"), ("dismissed", "acknowledged")
    ]  # fmt: skip
    # The same review again moves nothing and writes nothing.
    _post(client, "acknowledge", _own_step())
    assert trail.count() == 2


def test_a_dismissal_needs_a_reason_and_a_maintainer_with_a_second_factor(client, history):
    change = _own_step()
    maintainer = make_staff()
    login_staff(client, maintainer)
    response = _post(client, "dismiss", change, "  ")
    assert response.status_code == 200
    assert "Say why the change is dismissed" in response.content.decode()
    client.logout()
    password_only = make_staff("password-only", totp=False)
    client.force_login(password_only)
    assert _post(client, "dismiss", change, "no").status_code == 403  # a contributor here
    client.logout()
    assert _post(client, "dismiss", change, "no").status_code == 302
    assert not ChangeReview.objects.exists() and _own_step().review == ""
    assert not ModerationEvent.objects.exists()


def test_the_review_service_refuses_a_contributor(history, django_user_model):
    from django.core.exceptions import PermissionDenied

    from runs.changes.services import changes_review

    user = django_user_model.objects.create_user("bob", "bob@example.org", "pw-123456789")
    with pytest.raises(PermissionDenied):
        changes_review(
            changes=CellChange.objects.filter(pk=_own_step().pk),
            reviewer=user, state="acknowledged", reason="",
        )  # fmt: skip
    assert not ChangeReview.objects.exists()

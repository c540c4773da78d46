"""Every action of every registered ModelAdmin, posted with a selection that names no item:
a 400 with a message, never a 500, and nothing changes."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME

from attestations.models import Attestation, ModerationEvent
from tests.factories import RunFactory
from tests.factories_attestations import AttestationFactory, login_staff, make_staff, verify_email

BAD_SELECTIONS = [[""], ["abc"], ["1", ""], ["99999999999999999999999"], ["1.5"]]


def _actions() -> list[tuple[str, str]]:
    out = []
    for model, model_admin in admin.site._registry.items():
        url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        for name in model_admin.get_action_choices(_Request()):
            if name[0]:
                out.append((url, name[0]))
    return sorted(set(out))


class _Request:
    """Enough of a request for get_action_choices (a superuser with every permission)."""

    class user:  # noqa: N801
        is_active = is_staff = is_superuser = True

        @staticmethod
        def has_perm(perm, obj=None):
            return True

    GET: dict = {}


ACTIONS = _actions()


def test_every_admin_action_is_covered():
    assert ("/admin/attestations/attestation/", "approve") in ACTIONS
    assert len(ACTIONS) >= 8


@pytest.mark.parametrize("url, action", ACTIONS, ids=[f"{u.split('/')[3]}:{a}" for u, a in ACTIONS])
def test_an_action_on_a_selection_that_names_no_item(client, db, url, action):
    staff = make_staff()
    login_staff(client, staff)
    author = make_staff("author", totp=False)
    verify_email(author)
    item = AttestationFactory(run=RunFactory(), author=author)
    for selected in BAD_SELECTIONS:
        response = client.post(url, {"action": action, ACTION_CHECKBOX_NAME: selected})
        assert response.status_code == 400, (selected, response.status_code)
        assert "The selection names no item" in response.content.decode()
    item.refresh_from_db()
    assert item.state == Attestation.objects.get(pk=item.pk).state == "pending"
    assert not ModerationEvent.objects.exists()

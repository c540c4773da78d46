"""/users/<username>/: a user's approved reproductions and notes."""

from __future__ import annotations

import pytest

from tests.factories import RunFactory
from tests.factories_attestations import AttestationFactory


@pytest.mark.parametrize("who", ["owner", "other", "stranger", "anonymous"])
def test_profile_shows_only_approved(client, request, run, owner, who):
    AttestationFactory(run=run, author=owner, state="approved", body="visible")
    for state in ("pending", "rejected", "hidden", "withdrawn"):
        AttestationFactory(
            run=run,
            author=owner,
            state=state,
            body=f"secret-{state}",
            moderation_reason="off-topic" if state in ("rejected", "hidden") else "",
        )
    if who != "anonymous":
        client.force_login(request.getfixturevalue(who))
    response = client.get(f"/users/{owner.username}/")
    assert response.status_code == 200
    page = response.content.decode()
    assert len(response.context["items"]) == 1
    assert f"/runs/{run.public_id}/" in page
    assert "+2.0 % vs published" in page
    assert "secret-" not in page
    # Only alice herself sees her unpublished items, with the moderators' reasons.
    own = response.context["own_unpublished"]
    assert len(own) == (4 if who == "owner" else 0)
    assert page.count("Your items not shown publicly") == (1 if who == "owner" else 0)
    assert f"<title>{owner.username} · KernelIndex</title>" in page


def test_unknown_or_inactive_user_is_404(client, owner):
    assert client.get("/users/nobody/").status_code == 404
    owner.is_active = False
    owner.save()
    assert client.get(f"/users/{owner.username}/").status_code == 404


@pytest.mark.parametrize("count", [1, 8])
def test_profile_query_count_is_constant(client, owner, django_assert_max_num_queries, count):
    for _ in range(count):
        AttestationFactory(run=RunFactory(), author=owner, state="approved")
    with django_assert_max_num_queries(3):
        assert client.get(f"/users/{owner.username}/").status_code == 200

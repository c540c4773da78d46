"""runs/claims/signals.py: a transaction's evidence events judge each group they name once, at
commit; a savepoint rolled back takes its callback away and the next event registers another."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.db import transaction

from runs.claims import services, signals
from runs.models import EvidenceEvent


def _event(group_id: int, controlled: int | None = 1):
    """What the receiver reads of an event: its controlled run and its run's group."""
    return SimpleNamespace(controlled_run_id=controlled, run=SimpleNamespace(group_id=group_id))


def _written(group_id: int, **kwargs) -> None:
    signals._rejudge(sender=EvidenceEvent, instance=_event(group_id, **kwargs), created=True)


@pytest.fixture
def judged(monkeypatch) -> list[list[int]]:
    calls: list[list[int]] = []
    monkeypatch.setattr(services, "claims_judge", lambda ids=None: calls.append(ids))
    return calls


def test_one_judgement_a_transaction_for_every_group_its_events_name(
    db, judged, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        for group_id in (7, 3, 7, 7):
            _written(group_id)
        _written(9, controlled=None)  # no rerun measured it: no claim can move
    assert len(callbacks) == 1
    assert judged == [[3, 7]]


def test_a_rolled_back_savepoint_takes_its_groups_with_it(
    db, judged, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        try:
            with transaction.atomic():
                _written(5)
                raise RuntimeError("the result's record failed")
        except RuntimeError:
            pass
        with transaction.atomic():
            _written(6)
        _written(8)
    assert judged == [[6, 8]]

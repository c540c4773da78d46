"""Every table promised append-only refuses changes through the model and the QuerySet alike.

The ledger (ImportRecord) has its own test in test_ledger.py; these are the evidence history
and the moderation trail, held to the same rule.
"""

from __future__ import annotations

import pytest

from attestations.models import ModerationEvent
from runs import evidence
from runs.evidence import Outcome, evidence_apply
from runs.models import EvidenceEvent, ImportRecord
from tests.factories import RunFactory


@pytest.fixture
def evidence_event(db, monkeypatch):
    monkeypatch.setattr(evidence, "_table", lambda: {"cells": {}, "classes": {}})
    run = RunFactory(median=385_536)
    return evidence_apply(run=run, controlled_run=None, outcome=Outcome("checked"), cause="c")


def _refusals(model, row, field: str, value):
    setattr(row, field, value)
    return [
        row.save,
        row.delete,
        lambda: model.objects.filter(pk=row.pk).update(**{field: value}),
        lambda: model.objects.filter(pk=row.pk).delete(),
        lambda: model.objects.all().delete(),
        lambda: model.objects.bulk_update([row], [field]),
    ]


def test_evidence_events_cannot_be_changed_or_deleted(evidence_event):
    for attempt in _refusals(EvidenceEvent, evidence_event, "to_level", "reproduced"):
        with pytest.raises(ValueError, match="EvidenceEvent is append-only"):
            attempt()
    stored = EvidenceEvent.objects.get(pk=evidence_event.pk)
    assert (stored.to_level, EvidenceEvent.objects.count()) == ("checked", 1)


def test_moderation_events_cannot_be_changed_or_deleted(alice):
    event = ModerationEvent.objects.create(actor=alice, action="ban", subject=alice, reason="r")
    for attempt in _refusals(ModerationEvent, event, "reason", "rewritten"):
        with pytest.raises(ValueError, match="ModerationEvent is append-only"):
            attempt()
    assert ModerationEvent.objects.get(pk=event.pk).reason == "r"


def test_append_only_tables_share_one_rule():
    """One mechanism, not three copies: each table uses the AppendOnly model and QuerySet."""
    from runs.models import AppendOnly
    from runs.querysets import AppendOnlyQuerySet

    for model in (ImportRecord, EvidenceEvent, ModerationEvent):
        assert issubclass(model, AppendOnly), model
        assert isinstance(model.objects.all(), AppendOnlyQuerySet), model

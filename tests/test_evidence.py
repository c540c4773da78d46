"""runs.evidence: the rule, the one writer of Run.evidence, and its append-only history."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from runs.evidence import TOLERANCE, Outcome, evidence_apply, outcome_decide
from runs.models import Evidence, EvidenceEvent
from tests.factories import RunFactory

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def run(db):
    # Published on an H100 at 385 536 ns, like the example page's run.
    return RunFactory(median=385_536)


def decide(run, *, passed=True, device="cuda", product="NVIDIA H100", median_ms=0.385536):
    return outcome_decide(
        run=run,
        correctness_passed=passed,
        device=device,
        gpu_product=product,
        median=median_ms,
        unit="ms",
    ).level


def test_rule_table(run):
    inside = 0.385536 * (1 + TOLERANCE["latency"] * 0.99)
    outside = 0.385536 * (1 + TOLERANCE["latency"] * 1.01)
    assert decide(run, passed=False) == Evidence.INCORRECT
    assert decide(run, median_ms=inside) == Evidence.REPRODUCED
    assert decide(run, median_ms=0.385536 * (1 - TOLERANCE["latency"] * 0.99)) == "reproduced"
    assert decide(run, median_ms=outside) == Evidence.NOT_REPRODUCED
    # Same product in another form factor still counts; another product never does.
    assert decide(run, product="NVIDIA H200", median_ms=0.385536) == Evidence.CHECKED
    # A CPU result can never reproduce a GPU run, however close its number.
    assert decide(run, device="cpu", product=None, median_ms=0.385536) == Evidence.CHECKED
    assert decide(run, device="cpu", product=None, passed=False) == Evidence.INCORRECT


def test_memory_uses_its_own_tolerance(db):
    run = RunFactory(metric="memory", unit="B", median=64 * 2**20)
    level = outcome_decide(
        run=run,
        correctness_passed=True,
        device="cuda",
        gpu_product="NVIDIA H100",
        median=64 * (1 + TOLERANCE["memory"] * 2),
        unit="MiB",
    ).level
    assert level == Evidence.NOT_REPRODUCED


def test_apply_moves_the_level_and_writes_the_event(run):
    event = evidence_apply(
        run=run, controlled_run=None, outcome=Outcome("checked", {"x": 1}), cause="rerun-job:1"
    )
    run.refresh_from_db()
    assert run.evidence == "checked"
    assert (event.from_level, event.to_level, event.outcome) == ("reported", "checked", "checked")
    # A reproduction is not weakened by a later correctness-only check...
    evidence_apply(run=run, controlled_run=None, outcome=Outcome("reproduced"), cause="c2")
    event = evidence_apply(run=run, controlled_run=None, outcome=Outcome("checked"), cause="c3")
    run.refresh_from_db()
    assert run.evidence == "reproduced"
    assert (event.from_level, event.to_level, event.outcome) == (
        "reproduced",
        "reproduced",
        "checked",
    )
    # ...but a failed check or a same-GPU miss replaces it.
    evidence_apply(run=run, controlled_run=None, outcome=Outcome("incorrect"), cause="c4")
    run.refresh_from_db()
    assert run.evidence == "incorrect"
    assert list(EvidenceEvent.objects.for_run(run).values_list("to_level", flat=True)) == [
        "checked",
        "reproduced",
        "reproduced",
        "incorrect",
    ]


def test_events_are_append_only(run):
    event = evidence_apply(run=run, controlled_run=None, outcome=Outcome("checked"), cause="c")
    event.to_level = "reproduced"
    with pytest.raises(ValueError):
        event.save()
    with pytest.raises(ValueError):
        event.delete()


def test_outcomes_are_only_rerun_verdicts(run):
    with pytest.raises(ValueError):
        evidence_apply(run=run, controlled_run=None, outcome=Outcome("reported"), cause="c")
    with pytest.raises(ValueError):
        evidence_apply(run=run, controlled_run=None, outcome=Outcome("controlled"), cause="c")


WRITE_CALLS = {"Run", "create", "update", "get_or_create", "update_or_create", "bulk_create"}


def _evidence_writes(tree: ast.AST) -> list[int]:
    """Lines that write a Run's evidence: `x.evidence = ...`, `setattr(x, "evidence", ...)`,
    evidence= in create/update-like calls, "evidence" in update_fields / bulk_update fields."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr == "evidence":
                    lines.append(node.lineno)
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in WRITE_CALLS and any(k.arg == "evidence" for k in node.keywords):
                lines.append(node.lineno)
            if name == "setattr" and len(node.args) > 1:
                if isinstance(node.args[1], ast.Constant) and node.args[1].value == "evidence":
                    lines.append(node.lineno)
            for k in node.keywords:
                if k.arg in ("update_fields", "fields") and "'evidence'" in ast.dump(k.value):
                    lines.append(node.lineno)
            if name == "bulk_update" and "'evidence'" in ast.dump(node):
                lines.append(node.lineno)
    return lines


def test_the_checker_finds_writes():
    """The scan below is only worth something if it recognises a write when it sees one."""
    sample = (
        "run.evidence = 'reproduced'\n"
        "Run.objects.filter(pk=1).update(evidence='checked')\n"
        "setattr(run, 'evidence', 'x')\n"
        "run.save(update_fields=['evidence'])\n"
        "Run.objects.filter(evidence='checked')\n"
    )
    assert _evidence_writes(ast.parse(sample)) == [1, 2, 3, 4]


def test_no_other_module_writes_run_evidence():
    allowed = {REPO / "runs" / "evidence.py"}
    offenders = []
    for path in REPO.rglob("*.py"):
        parts = set(path.relative_to(REPO).parts)
        if parts & {".venv", "tests", "migrations", "node_modules", "kirunner"} or path in allowed:
            continue
        for line in _evidence_writes(ast.parse(path.read_text(), str(path))):
            offenders.append(f"{path.relative_to(REPO)}:{line}")
    assert offenders == []


def test_admin_cannot_write_evidence(run, client):
    from tests.factories_community import login_staff, make_staff

    login_staff(client, make_staff())
    url = f"/admin/runs/run/{run.pk}/change/"
    page = client.get(url)
    assert page.status_code == 200
    assert 'name="evidence"' not in page.content.decode()
    # The change form has no evidence field at all, so no POST can carry one into the model.
    from django.contrib import admin

    from runs.models import Run

    request = page.wsgi_request
    form_class = admin.site._registry[Run].get_form(request, run)
    assert "evidence" not in form_class.base_fields


def test_api_serializers_never_write_evidence():
    """Every DRF serializer of Run keeps `evidence` read-only."""
    import importlib

    from django.urls import get_resolver
    from rest_framework import serializers

    from runs.models import Run

    assert get_resolver().url_patterns  # imports every view module, and its serializers
    importlib.import_module("runs.api.serializers")

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    found = [
        s
        for s in subclasses(serializers.ModelSerializer)
        if getattr(getattr(s, "Meta", None), "model", None) is Run
    ]
    assert found
    for serializer_class in found:
        field = serializer_class().fields.get("evidence")
        assert field is None or field.read_only, serializer_class

"""runs.evidence: the rule, the one writer of Run.evidence, and its append-only history."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from runs import evidence
from runs.evidence import TOLERANCE, NoVerdict, Outcome, evidence_apply, outcome_decide
from runs.models import Evidence, EvidenceEvent
from tests.factories import RunFactory
from tests.source_files import python_files

REPO = Path(__file__).resolve().parents[2]
PUBLISHED_MS = 0.385536


@pytest.fixture(autouse=True)
def _no_upstream_table(monkeypatch):
    """The rule under test, not the shipped table: every run gets the global tolerance unless
    a test installs a table of its own."""
    monkeypatch.setattr(evidence, "_table", lambda: {"cells": {}, "classes": {}})


@pytest.fixture
def run(db):
    # Published on an H100 at 385 536 ns, like the example page's run.
    return RunFactory(median=385_536)


def measured(do_bench_ms, *, device_ms=None, host_ms=0.02, flush_ms=0.06, spread=0.01, clocks=None):
    """A latency measurement as kirunner records it: the do_bench median and, when
    device_ms is given, the diagnostics (cold device time with a p20-p80 spread of
    `spread`, host enqueue time, flush time, NVML readings)."""
    m = {"median": do_bench_ms, "unit": "ms"}
    if device_ms is not None:
        half = device_ms * spread / 2
        m["diagnostics"] = {
            "hostEnqueue": {"median": host_ms},
            "flush": {"median": flush_ms},
            "device": {
                "median": device_ms,
                "p20": device_ms - half,
                "p80": device_ms + half,
                "method": "cuda-graph",
            },
            "clocks": clocks or {"before": {"clockEventReasons": 0}, "after": {}},
        }
    return m


def decide(run, measurement=None, *, passed=True, device="cuda", product="NVIDIA H100", env=None):
    return outcome_decide(
        run=run,
        correctness_passed=passed,
        device=device,
        gpu_product=product,
        measurement=measurement or measured(PUBLISHED_MS, device_ms=PUBLISHED_MS),
        environment=env,
    )


def test_rule_table(run):
    tol = TOLERANCE["latency"]  # the factory's source has no per-cell table: the global one
    inside, outside = PUBLISHED_MS * (1 + tol * 0.99), PUBLISHED_MS * (1 + tol * 1.01)
    fast_device = PUBLISHED_MS * 0.2  # the GPU needs a fifth of the published figure
    slow_device = PUBLISHED_MS * 2.0  # the GPU needs twice the published figure
    cases = [
        ("correctness failed", decide(run, passed=False), Evidence.INCORRECT),
        ("CPU", decide(run, device="cpu", product=None), Evidence.CHECKED),
        ("another GPU product", decide(run, product="NVIDIA H200"), Evidence.CHECKED),
        # device-bound: do_bench within 15 % of the device time, judged against the published.
        ("device-bound within", decide(run, measured(inside, device_ms=inside)), "reproduced"),
        (
            "device-bound below, within",
            decide(run, measured(PUBLISHED_MS * (1 - tol * 0.99), device_ms=PUBLISHED_MS * 0.66)),
            Evidence.REPRODUCED,
        ),
        (
            "device-bound outside",
            decide(run, measured(outside, device_ms=outside)),
            "not-reproduced",
        ),
        # host-bound: the host needs longer to enqueue than the flush takes; do_bench is void.
        (
            "host-bound, published slower than the device",
            decide(run, measured(outside * 2, device_ms=fast_device, host_ms=0.5)),
            Evidence.CHECKED,
        ),
        (
            "host-bound, published faster than the device",
            decide(run, measured(slow_device * 1.5, device_ms=slow_device, host_ms=0.9)),
            Evidence.NOT_REPRODUCED,
        ),
        (
            "unexplained gap (host fast, do_bench slow)",
            decide(run, measured(outside * 2, device_ms=fast_device, host_ms=0.01)),
            Evidence.CHECKED,
        ),
        ("no diagnostics recorded", decide(run, measured(PUBLISHED_MS)), Evidence.CHECKED),
    ]
    assert [(name, o.level) for name, o, _ in cases] == [(name, want) for name, _, want in cases]
    host_bound = cases[6][1].facts
    assert host_bound["classification"]["kind"] == "host-bound"
    assert host_bound["why"].startswith("host-bound on our runner: device time 77.1 µs")
    assert "faster than the GPU can run this call" in cases[7][1].facts["why"]
    # The published figure is five times the device time: the source's host dominated it.
    assert host_bound["hostDominatedFactor"] == 5.0
    assert "H200 device time 385.5 µs" in cases[2][1].facts["why"]


def test_no_verdict_cases(run):
    throttled = {"after": {"clockEventReasons": 0x40}}
    capped = {"after": {"clockEventReasons": 0x4, "powerLimitW": 700, "defaultPowerLimitW": 700}}
    lowered = {"after": {"clockEventReasons": 0x4, "powerLimitW": 400, "defaultPowerLimitW": 700}}
    with pytest.raises(NoVerdict, match="hardware thermal slowdown"):
        decide(run, measured(PUBLISHED_MS, device_ms=PUBLISHED_MS, clocks=throttled))
    with pytest.raises(NoVerdict, match="software power cap"):
        decide(run, measured(PUBLISHED_MS, device_ms=PUBLISHED_MS, clocks=lowered))
    # Running at the card's own rated power limit is not throttling.
    assert decide(run, measured(PUBLISHED_MS, device_ms=PUBLISHED_MS, clocks=capped)).level == (
        Evidence.REPRODUCED
    )
    with pytest.raises(NoVerdict, match="repeats disagree"):
        decide(run, measured(PUBLISHED_MS, device_ms=PUBLISHED_MS, spread=0.3))
    without_spread = measured(PUBLISHED_MS, device_ms=PUBLISHED_MS)
    del without_spread["diagnostics"]["device"]["p20"]
    with pytest.raises(NoVerdict, match="no p20"):
        decide(run, without_spread)
    memory_run = RunFactory(metric="memory", unit="B", median=64 * 2**20)
    reading = {"median": 64.0, "unit": "MiB", "details": {}}
    with pytest.raises(NoVerdict, match="held 32 MiB"):
        decide(memory_run, reading, env={"allocatedAtStartBytes": 32 * 2**20})
    subtracted = {**reading, "details": {"baselineBytes": 32 * 2**20}}
    env = {"allocatedAtStartBytes": 32 * 2**20}
    assert decide(memory_run, subtracted, env=env).level == Evidence.REPRODUCED
    with pytest.raises(NoVerdict, match="not positive"):
        decide(RunFactory(median=0))


def test_memory_uses_its_own_tolerance(db):
    run = RunFactory(metric="memory", unit="B", median=64 * 2**20)
    reading = {"median": 64 * (1 + TOLERANCE["memory"] * 2), "unit": "MiB"}
    assert decide(run, reading).level == Evidence.NOT_REPRODUCED


def test_tolerance_comes_from_the_cell_then_its_class(db, monkeypatch):
    run = RunFactory(median=100_000)
    gpu = run.environment.gpu.upstream_name
    bench, provider = run.benchmark.slug, run.implementation.provider_key
    cell = "|".join((bench, run.timed_pass, "latency", provider, run.workload.slug, gpu))
    table = {
        "cells": {cell: [0.05, 30]},
        "classes": {"|".join((bench, provider, gpu, "latency")): [0.9, 100]},
    }
    monkeypatch.setattr(evidence, "_table", lambda: table)
    monkeypatch.setattr(evidence, "TABLE_SOURCES", {run.source.slug})
    # 8 % off: inside the global 35 %, outside this cell's own 5 %.
    outcome = decide(run, measured(0.108, device_ms=0.108))
    assert (outcome.level, outcome.facts["toleranceSource"]) == ("not-reproduced", "cell")
    # Another workload of the same class has no cell of its own: the class's 90 % applies,
    # which is wider than any verdict can rest on.
    other = RunFactory(median=100_000, benchmark=run.benchmark, source=run.source)
    other.workload.slug = "another"
    outcome = decide(other, measured(0.108, device_ms=0.108))
    assert (outcome.level, outcome.facts["toleranceSource"]) == ("checked", "class")
    assert "too wide to confirm or refute" in outcome.facts["why"]


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
            # Index(fields=[...]) and constraints declare the schema; they write nothing.
            declares = name in ("Index", "UniqueConstraint", "CheckConstraint")
            for k in node.keywords:
                if declares:
                    break
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
    for path in python_files({"tests", "migrations", "kirunner"}):
        if path in allowed:
            continue
        for line in _evidence_writes(ast.parse(path.read_text(), str(path))):
            offenders.append(f"{path.relative_to(REPO)}:{line}")
    assert offenders == []


def test_admin_cannot_write_evidence(run, client):
    from tests.factories_attestations import login_staff, make_staff

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

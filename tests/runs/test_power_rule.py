"""A cell timed power-capped is judged against the spread we see for its class across
processes and days (runs/evidence_power.py, bench/h200/power_tolerance.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from runs import evidence, evidence_power
from runs.evidence import TOLERANCE, outcome_decide
from runs.models import Evidence
from tests.factories import RunFactory

REPO = Path(__file__).resolve().parents[2]
PUBLISHED_MS = 10.0


def _script():
    spec = importlib.util.spec_from_file_location(
        "power_tolerance", REPO / "bench" / "h200" / "power_tolerance.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_table_is_what_the_signed_results_give():
    assert evidence_power._table() == _script().table(REPO / "data" / "reruns")


def test_the_table_covers_the_capped_classes_we_measured():
    classes = evidence_power._table()["classes"]
    # The MLP cells run at the power cap on the lent H200 (kirunner/power.py windows).
    assert {"geglu|huggingface", "geglu|liger", "any"} <= set(classes)
    for row in classes.values():
        assert row["tolerance"] >= row["maxDeviation"] and row["tolerance"] >= 0.05


def _result(path, *, median, kind, capped=True, provider="liger"):
    path.parent.mkdir(parents=True, exist_ok=True)
    window = {"n": 50, "powerCapped": capped, "smMHz": {"min": 1470, "median": 1500, "max": 1965}}
    payload = {
        "status": "ok",
        "device": "cuda",
        "metric": "latency",
        "benchmark": "geglu",
        "pass": "full",
        "provider": provider,
        "workload": {"resolved": {"T": 4096}},
        "measurement": {
            "median": median,
            "power": window,
            "diagnostics": {"classification": {"kind": kind}},
        },
    }
    path.write_text(json.dumps({"payload": payload}))


def test_only_device_bound_figures_make_the_spread(tmp_path):
    # A host-bound do_bench figure moves with the host's launch path: two processes 60 %
    # apart there say nothing about the GPU's clocks and must not widen any tolerance.
    for batch, (dev, host) in {"a": (10.0, 1.0), "b": (10.4, 1.6)}.items():
        _result(tmp_path / batch / "results" / "1.json", median=dev, kind="device-bound")
        _result(
            tmp_path / batch / "results" / "2.json", median=host, kind="host-bound", provider="hf"
        )
    classes = _script().table(tmp_path)["classes"]
    assert set(classes) == {"any"}
    assert classes["any"]["cells"] == 1 and classes["any"]["observations"] == 2
    assert classes["any"]["maxDeviation"] == pytest.approx(0.2 / 10.2, abs=1e-6)
    assert classes["any"]["tolerance"] == 0.05


@pytest.fixture
def tables(monkeypatch):
    monkeypatch.setattr(evidence, "_table", lambda: {"cells": {}, "classes": {}})
    monkeypatch.setattr(
        evidence_power,
        "_table",
        lambda: {"classes": {"any": {"tolerance": 0.40, "cells": 9, "observations": 20}}},
    )


def _measured(median_ms, *, capped=None, after_mask=0, samples=100):
    window = {"n": 50, "powerCapped": capped, "smMHz": {"min": 1470, "median": 1500, "max": 1965}}
    m = {
        "median": median_ms,
        "unit": "ms",
        "samples": [median_ms] * samples,
        "diagnostics": {
            "hostEnqueue": {"median": 0.05},
            "flush": {"median": 0.06},
            "device": {"median": median_ms, "p20": median_ms, "p80": median_ms},
            "clocks": {
                "before": {"clockEventReasons": 0},
                "after": {"clockEventReasons": after_mask},
            },
        },
    }
    if capped is not None:
        m["power"] = {"doBench": window, "deviceTime": {**window, "powerCapped": False}}
    return m


def _decide(run, m):
    return outcome_decide(
        run=run, correctness_passed=True, device="cuda", gpu_product="NVIDIA H100", measurement=m
    )


def test_power_capped_tolerance_table(db, tables):
    run = RunFactory(median=int(PUBLISHED_MS * 1e6))
    global_tol = TOLERANCE["latency"]  # 35 %
    off = PUBLISHED_MS * 1.38  # 38 % slow: outside 35 %, inside the capped class's 40 %
    cases = [
        ("not capped, 38 % off", _measured(off, capped=False), Evidence.NOT_REPRODUCED, global_tol),
        ("capped, 38 % off", _measured(off, capped=True), Evidence.REPRODUCED, 0.40),
        ("capped, 45 % off", _measured(PUBLISHED_MS * 1.45, capped=True), "not-reproduced", 0.40),
        # A runner before the sampler: the cap bit NVML read right after stands in.
        ("legacy cap bit after", _measured(off, after_mask=0x4), Evidence.REPRODUCED, 0.40),
        ("legacy, no cap bit", _measured(off, after_mask=0), Evidence.NOT_REPRODUCED, global_tol),
    ]
    got = [
        (name, *(lambda o: (o.level, o.facts["tolerance"]))(_decide(run, m)))
        for name, m, *_ in cases
    ]
    assert got == [(name, level, tol) for name, _, level, tol in cases]
    capped = _decide(run, _measured(off, capped=True)).facts
    assert capped["toleranceSource"] == "power-capped"
    assert "timed power-capped" in capped["toleranceDetail"]
    assert capped["powerCapped"] == {"sampled": ["doBench"]}
    assert "samples" not in capped["power"]["doBench"]


def test_a_tighter_capped_spread_never_narrows_the_upstream_tolerance(db, monkeypatch):
    monkeypatch.setattr(evidence, "_table", lambda: {"cells": {}, "classes": {}})
    monkeypatch.setattr(
        evidence_power,
        "_table",
        lambda: {"classes": {"any": {"tolerance": 0.07, "cells": 9, "observations": 20}}},
    )
    run = RunFactory(median=int(PUBLISHED_MS * 1e6))
    out = _decide(run, _measured(PUBLISHED_MS * 1.2, capped=True))
    assert out.level == Evidence.REPRODUCED and out.facts["tolerance"] == TOLERANCE["latency"]

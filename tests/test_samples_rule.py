"""No verdict on one sample (runs/evidence_samples.py): a do_bench figure of fewer than a
handful of samples needs agreement across independent processes, or rests on the device time
and says so, else it is `checked` with the reason."""

from __future__ import annotations

import pytest

from runs import evidence, evidence_power, evidence_samples
from runs.evidence import evidence_apply, outcome_decide
from runs.evidence_samples import judge
from runs.models import Evidence
from tests.factories import RunFactory, SourceFactory

PUB = 6.0e6  # ns
TOL = 0.05


@pytest.mark.parametrize(
    "name,measured,others,device,consistent,level,basis",
    [
        ("processes agree, within", 6.1e6, [6.05e6], None, False, "reproduced", "processes"),
        (
            "processes agree, outside",
            6.7e6,
            [6.6e6, 6.9e6],
            None,
            False,
            "not-reproduced",
            "processes",
        ),
        ("processes disagree", 6.7e6, [6.1e6], 6.0e6, True, "checked", "none"),
        ("alone, device time within", 6.7e6, [], 6.02e6, True, "reproduced", "device-time"),
        ("alone, device time outside", 6.1e6, [], 7.0e6, True, "not-reproduced", "device-time"),
        ("alone, device time inconsistent", 6.1e6, [], 6.0e6, False, "checked", "none"),
        ("alone, no device time", 6.1e6, [], None, False, "checked", "none"),
    ],
)
def test_judge_table(name, measured, others, device, consistent, level, basis):
    few = judge(
        measured=measured,
        published=PUB,
        tolerance=TOL,
        samples=1,
        others=others,
        device=device,
        device_consistent=consistent,
    )
    assert (few.level, few.basis) == (level, basis)
    assert "1 sample(s)" in few.why
    if basis == "device-time":
        assert "the verdict rests on the device time" in few.why


@pytest.fixture
def run(db, monkeypatch):
    monkeypatch.setattr(evidence, "_table", lambda: {"cells": {}, "classes": {"x": [TOL, 99]}})
    monkeypatch.setattr(
        evidence, "tolerance_for", lambda r: evidence.Tolerance(TOL, "class", "test")
    )
    monkeypatch.setattr(evidence_power, "_table", lambda: {"classes": {}})
    return RunFactory(median=int(PUB))


def _m(do_bench_ms, n, device_ms, spread=0.0):
    return {
        "median": do_bench_ms,
        "unit": "ms",
        "samples": [do_bench_ms] * n,
        "diagnostics": {
            "hostEnqueue": {"median": 0.4},
            "flush": {"median": 0.06},
            "device": {
                "median": device_ms,
                "p20": device_ms * (1 - spread),
                "p80": device_ms * (1 + spread),
            },
            "clocks": {},
        },
    }


def _decide(run, m, process):
    return outcome_decide(
        run=run,
        correctness_passed=True,
        device="cuda",
        gpu_product="NVIDIA H100",
        measurement=m,
        process=process,
    )


def test_one_sample_off_upstream_rests_on_the_device_time(run):
    # The geglu case: one do_bench sample 9 % off, the device time within 1 %.
    out = _decide(run, _m(6.54, 1, 6.05), "p1")
    assert out.level == Evidence.REPRODUCED
    assert out.facts["fewSamplesBasis"] == "device-time" and out.facts["fewSamples"] == 1


def test_many_samples_keep_the_do_bench_verdict(run):
    out = _decide(run, _m(6.54, 50, 6.05), "p1")
    assert out.level == Evidence.NOT_REPRODUCED and "fewSamples" not in out.facts


def _controlled():
    """A run of the source kernelindex: what the first process's result became."""
    return RunFactory(source=SourceFactory(slug="kernelindex"))


def test_a_second_process_must_agree(run):
    first = _decide(run, _m(6.54, 1, 6.05), "p1")
    evidence_apply(run=run, controlled_run=_controlled(), outcome=first, cause="test")
    # Another process: its one sample is within tolerance, the first process's was not.
    second = _decide(run, _m(6.1, 1, 6.05), "p2")
    assert second.level == Evidence.CHECKED and second.facts["fewSamplesBasis"] == "none"
    assert "independent processes disagree" in second.facts["why"]
    # The same process again is not independent: the device time decides.
    again = _decide(run, _m(6.1, 1, 6.05), "p1")
    assert again.facts["fewSamplesBasis"] == "device-time"


def test_processes_that_agree_carry_the_verdict(run):
    first = _decide(run, _m(6.1, 1, 6.05), "p1")
    evidence_apply(run=run, controlled_run=_controlled(), outcome=first, cause="test")
    second = _decide(run, _m(6.2, 1, 6.05), "p2")
    assert second.level == Evidence.REPRODUCED and second.facts["fewSamplesBasis"] == "processes"


def test_the_limit_is_a_handful():
    assert evidence_samples.FEW_SAMPLES == 5

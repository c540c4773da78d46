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


def test_a_device_bound_verdict_rests_on_the_median_of_the_processes(run):
    """Many samples each, three processes: a cell near its tolerance does not flip with the
    process recorded last (5 % tolerance; 6.2 ms is 3.3 % off, 6.31 ms 5.17 % off)."""
    first = _decide(run, _m(6.2, 50, 6.15), "p1")
    assert first.level == Evidence.REPRODUCED and "independent processes" not in first.facts["why"]
    evidence_apply(run=run, controlled_run=_controlled(), outcome=first, cause="test")
    second = _decide(run, _m(6.25, 50, 6.2), "p2")
    assert second.level == Evidence.REPRODUCED and second.facts["processes"] == 2
    evidence_apply(run=run, controlled_run=_controlled(), outcome=second, cause="test")
    third = _decide(run, _m(6.31, 50, 6.25), "p3")
    # Alone, 6.31 ms would be not-reproduced; the median of the three is 4.2 % off.
    assert third.level == Evidence.REPRODUCED
    assert third.facts["processes"] == 3 and third.facts["judged"] == 6.25e6
    assert third.facts["measured"] == 6.31e6  # its own figure, for the processes after it
    assert (
        "the median of 3 independent processes (6310.0 µs, 6200.0 µs, 6250.0 µs), 2 of them within the tolerance on its own"
        in (third.facts["why"])
    )
    evidence_apply(run=run, controlled_run=_controlled(), outcome=third, cause="test")
    # The same process again replaces its own figure, it does not add one: the median moves
    # to 6.31 ms.
    again = _decide(run, _m(6.4, 50, 6.35), "p2")
    assert again.facts["processes"] == 3 and again.facts["judged"] == 6.31e6
    assert again.level == Evidence.NOT_REPRODUCED


def test_processes_far_apart_unsettle_the_verdict(run):
    # The DyT case: one process 470 us, another 1518 us for the same device-bound call.
    first = _decide(run, _m(6.1, 50, 6.05), "p1")
    assert evidence_apply(run=run, controlled_run=_controlled(), outcome=first, cause="t")
    assert run.evidence == Evidence.REPRODUCED
    second = _decide(run, _m(19.0, 50, 18.9), "p2")
    assert second.level == Evidence.CHECKED and second.unsettles
    assert second.facts["why"].startswith("independent processes disagree: 19000.0 µs, 6100.0 µs")
    event = evidence_apply(run=run, controlled_run=_controlled(), outcome=second, cause="t")
    # A checked from a correctness-only result keeps a verdict; this one does not.
    assert (event.from_level, event.to_level) == (Evidence.REPRODUCED, Evidence.CHECKED)


def test_processes_close_together_either_side_of_the_tolerance_are_judged_on_their_median(run):
    # 4.9 % and 5.1 % off a 5 % tolerance: the figures agree, the median (5.0 %) is within.
    first = _decide(run, _m(6.294, 50, 6.25), "p1")
    evidence_apply(run=run, controlled_run=_controlled(), outcome=first, cause="t")
    second = _decide(run, _m(6.306, 50, 6.26), "p2")
    assert second.level == Evidence.REPRODUCED and second.facts["deviation"] == 0.05
    assert "1 of them within the tolerance on its own" in second.facts["why"]


def test_one_sample_processes_that_disagree_unsettle_the_verdict_too(run):
    first = _decide(run, _m(6.1, 1, 6.05), "p1")
    evidence_apply(run=run, controlled_run=_controlled(), outcome=first, cause="t")
    assert run.evidence == Evidence.REPRODUCED
    second = _decide(run, _m(6.6, 1, 6.55), "p2")
    event = evidence_apply(run=run, controlled_run=_controlled(), outcome=second, cause="t")
    assert event.to_level == Evidence.CHECKED and "disagree" in event.facts["why"]


def test_only_device_bound_figures_of_the_same_product_are_weighed(run):
    host_bound = _m(6.2, 50, 3.0)  # do_bench twice the device time: it timed the host
    first = _decide(run, host_bound, "p1")
    assert first.facts["classification"]["kind"] != "device-bound"
    evidence_apply(run=run, controlled_run=_controlled(), outcome=first, cause="test")
    other_product = outcome_decide(
        run=run, correctness_passed=True, device="cuda", gpu_product="NVIDIA H200",
        measurement=_m(6.0, 50, 6.0), process="p2",
    )  # fmt: skip
    evidence_apply(run=run, controlled_run=_controlled(), outcome=other_product, cause="test")
    out = _decide(run, _m(6.4, 50, 6.35), "p3")
    assert "processes" not in out.facts and out.level == Evidence.NOT_REPRODUCED


def test_a_deviation_at_the_tolerance_shows_the_decimals_that_tell_them_apart():
    assert evidence_samples.percent_apart(0.340015, 0.34) == "34.002%"
    assert evidence_samples.percent_apart(0.3325, 0.34) == "33.2%"
    assert evidence_samples.percent_apart(0.34, 0.34) == "34.000%"


def _checked_by(run, process, *, passed, device="cuda", worst=1.2):
    return outcome_decide(
        run=run,
        correctness_passed=passed,
        device=device,
        gpu_product="NVIDIA H100" if device == "cuda" else None,
        measurement=_m(6.1, 50, 6.05),
        process=process,
        check_worst=None if passed else worst,
    )


def test_a_check_failed_in_the_only_process_is_incorrect(run):
    assert _checked_by(run, "p1", passed=False).level == Evidence.INCORRECT


def test_a_check_failed_where_another_process_passed_it_is_checked_and_keeps_the_timing(run):
    # The preference-loss case: the bf16 weight gradient passed in one process and failed by
    # 1.2x its bound in the next, on other random inputs.
    first = _checked_by(run, "p1", passed=True)
    assert first.level == Evidence.REPRODUCED
    evidence_apply(run=run, controlled_run=_controlled(), outcome=first, cause="test")
    second = _checked_by(run, "p2", passed=False)
    assert second.level == Evidence.CHECKED and second.facts["checksPassedElsewhere"] == 1
    assert "missed its bound by 1.20 times" in second.facts["why"]
    assert "tolerance's edge" in second.facts["why"]
    evidence_apply(run=run, controlled_run=_controlled(), outcome=second, cause="test")
    run.refresh_from_db()
    assert run.evidence == Evidence.REPRODUCED


def test_only_other_gpu_processes_that_passed_count(run):
    # The same process passing earlier, or a CPU check, is no other GPU process's pass.
    for process, device in (("p1", "cuda"), ("p2", "cpu")):
        earlier = _checked_by(run, process, passed=True, device=device)
        evidence_apply(run=run, controlled_run=_controlled(), outcome=earlier, cause="test")
    assert _checked_by(run, "p1", passed=False).level == Evidence.INCORRECT
    # A process that passed and later failed counts by its latest event.
    failed = _checked_by(run, "p3", passed=False)
    evidence_apply(run=run, controlled_run=_controlled(), outcome=failed, cause="test")
    assert _checked_by(run, "p3", passed=True).level == Evidence.REPRODUCED
    assert _checked_by(run, "p4", passed=False).facts["checksPassedElsewhere"] == 1


def test_a_device_time_verdict_at_the_tolerance_shows_the_decimals():
    # 8.03 % against 8 %: "8.0% off" would read as within.
    few = judge(
        measured=27.0e6,
        published=27.225e6,
        tolerance=0.08,
        samples=3,
        others=[],
        device=25.04e6,
        device_consistent=True,
    )
    assert few.level == "not-reproduced"
    assert "8.03% off the published median, outside the 8% tolerance" in few.why


@pytest.mark.parametrize("worst", [2.5, 1e4, None])
def test_a_wide_miss_or_a_nan_is_incorrect_whatever_another_process_gave(run, worst):
    first = _checked_by(run, "p1", passed=True)
    evidence_apply(run=run, controlled_run=_controlled(), outcome=first, cause="test")
    out = _checked_by(run, "p2", passed=False, worst=worst)
    assert out.level == Evidence.INCORRECT and out.facts["checkWorst"] == worst


@pytest.mark.parametrize(
    "checks,worst",
    [
        ([{"passed": True, "worstRatio": 0.5}, {"passed": False, "worstRatio": 1.3}], 1.3),
        ([{"passed": False, "worstRatio": 1.1}, {"passed": False, "worstRatio": 1.9}], 1.9),
        ([{"passed": False, "worstRatio": None}, {"passed": False, "worstRatio": 1.1}], None),
        ([{"passed": False, "worstRatio": float("nan")}], None),
        ([{"passed": False, "worstRatio": float("inf")}], None),
        ([], None),
    ],
)
def test_the_worst_miss_is_read_from_the_failed_checks(checks, worst):
    from reruns.services import _check_worst

    assert _check_worst({"correctness": {"passed": False, "checks": checks}}) == worst


def _without_device_time(do_bench_ms, n):
    m = _m(do_bench_ms, n, 0.0)
    del m["diagnostics"]  # a process whose diagnostics failed (a tainted graph capture)
    return m


@pytest.mark.parametrize("device_bound_first", [True, False])
def test_a_few_sample_verdict_does_not_depend_on_the_order_results_arrive(run, device_bound_first):
    # The b4593f58 case: one process device-bound, its device time just outside the tolerance
    # (6.31 ms, 5.2 % off) while its do_bench figure is within; two more processes recorded no
    # device time, their do_bench figures within too. Three processes agree on do_bench.
    results = [(_m(6.1, 3, 6.31), "p1"), (_without_device_time(6.2, 3), "p2"),
               (_without_device_time(6.15, 3), "p3")]  # fmt: skip
    if not device_bound_first:
        results = results[1:] + results[:1]
    for m, process in results:
        out = _decide(run, m, process)
        event = evidence_apply(run=run, controlled_run=_controlled(), outcome=out, cause="t")
    run.refresh_from_db()
    assert run.evidence == Evidence.REPRODUCED
    assert event.facts["fewSamplesBasis"] == "processes"
    assert "3 independent processes agree" in event.facts["why"]


def test_alone_a_result_without_device_time_still_neither_confirms_nor_refutes(run):
    out = _decide(run, _without_device_time(6.1, 3), "p1")
    assert out.level == Evidence.CHECKED and "no device time was recorded" in out.facts["why"]
    assert "fewSamples" not in out.facts


def test_a_result_without_device_time_that_disagrees_unsettles_the_device_time_verdict(run):
    first = _decide(run, _m(6.1, 3, 6.05), "p1")  # device time within: reproduced
    evidence_apply(run=run, controlled_run=_controlled(), outcome=first, cause="t")
    assert run.evidence == Evidence.REPRODUCED
    second = _decide(run, _without_device_time(6.9, 3), "p2")  # 15 % off
    event = evidence_apply(run=run, controlled_run=_controlled(), outcome=second, cause="t")
    assert event.to_level == Evidence.CHECKED and "disagree" in event.facts["why"]
    assert "this process recorded no device time" in event.facts["why"]

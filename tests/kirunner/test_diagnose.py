"""kirunner.diagnose: the classification the runner records and the server re-applies, and
what a CPU run says in their place."""

from __future__ import annotations

import kirunner
from kirunner import diagnose
from kirunner.runner import validate_job

from .jobs import make_job


def test_classification_table() -> None:
    # (do_bench ms, device ms, host enqueue ms, flush ms) -> kind
    cases = [
        ((0.100, 0.095, 0.02, 0.06), "device-bound"),  # 5 % apart
        ((0.088, 0.100, 0.02, 0.06), "device-bound"),  # faster than device, within 15 %
        ((0.110, 0.053, 0.102, 0.06), "host-bound"),  # liger rms_norm on the lent H200
        ((0.300, 0.100, 0.03, 0.06), "unexplained"),  # host quick, do_bench still slow
        ((0.050, 0.100, 0.03, 0.06), "unexplained"),  # do_bench far below the device time
    ]
    got = [
        diagnose.classify(do_bench_ms=d, device_ms=v, host_enqueue_ms=h, flush_ms=f)["kind"]
        for (d, v, h, f), _ in cases
    ]
    assert got == [kind for _, kind in cases]
    host = diagnose.classify(
        do_bench_ms=0.110, device_ms=0.053, host_enqueue_ms=0.102, flush_ms=0.06
    )
    assert host["doBenchOverDevice"] == 0.110 / 0.053
    assert "the GPU waited for the host" in host["why"]


def test_throttle_and_repeat_checks() -> None:
    assert diagnose.throttled({"before": {"clockEventReasons": 0x1}, "after": {}}) == []  # idle
    hot = {"before": {"clockEventReasons": 0}, "after": {"clockEventReasons": 0x20 | 0x8}}
    assert diagnose.throttled(hot) == ["hardware slowdown", "software thermal slowdown"]
    at_limit = {"after": {"clockEventReasons": 0x4, "powerLimitW": 700, "defaultPowerLimitW": 700}}
    lowered = {"after": {"clockEventReasons": 0x4, "powerLimitW": 350, "defaultPowerLimitW": 700}}
    assert diagnose.throttled(at_limit) == []
    assert diagnose.throttled(lowered) == ["software power cap"]
    steady = diagnose.summary([1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.0, 1.01, 3.0])
    assert steady["relativeRange"] > 1 and diagnose.repeats_consistent(steady)
    assert not diagnose.repeats_consistent(diagnose.summary([1.0, 1.3, 0.8, 1.2, 0.9]))


def test_cpu_results_say_the_diagnostics_are_absent() -> None:
    result = kirunner.run_job(make_job("rms_norm", pass_="forward"), force_cpu=True, rep=5, seed=1)
    diagnostics = result["payload"]["measurement"]["diagnostics"]
    assert diagnostics == {
        "absent": "CPU run: no device time, host enqueue time, flush or GPU clocks"
    }


def test_a_commit_is_not_read_as_a_release() -> None:
    job = make_job("rms_norm", provider="liger", revision="0.6.0")
    job["implementation"]["revision"] = "02bac05"
    spec = validate_job(job)
    # "02bac05" read as a version is 2.5: it would have picked an arbitrary release.
    assert (spec["revision"], spec["commit"]) == ("0.6.0", "02bac05")


def test_enqueue_blocks_shrink_for_slow_calls_only():
    """Calls up to 2 ms keep 20 calls a block; a 200 ms call makes one, never zero."""
    from kirunner.diagnose import enqueue_calls

    assert enqueue_calls(0.01) == 20
    assert enqueue_calls(2.0) == 20
    assert enqueue_calls(4.0) == 10
    assert enqueue_calls(200.0) == 1
    assert enqueue_calls(0.0) == 20


def test_device_repeats_shrink_for_calls_over_300_ms_only():
    """Ten repeats up to 300 ms a call, about 3 s of them beyond, and never fewer than three
    (the consistency rule reads a p20-p80 spread)."""
    from kirunner.diagnose import device_repeats

    assert device_repeats(0.05) == 10
    assert device_repeats(300.0) == 10
    assert device_repeats(600.0) == 5
    assert device_repeats(2900.0) == 3

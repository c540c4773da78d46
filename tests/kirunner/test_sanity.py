"""kirunner.sanity: every figure of a measurement is checked, and every real result passes."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from kirunner import sanity

REPO = Path(__file__).resolve().parents[2]
REAL_RESULTS = sorted((REPO / "data" / "reruns").glob("*/*/*.json"))


def _latency() -> dict:
    return {
        "unit": "ms",
        "median": 0.34,
        "p20": 0.33,
        "p80": 0.35,
        "values": [0.34, 0.33, 0.35],
        "samples": [0.33, 0.34, 0.35],
        "diagnostics": {
            "hostEnqueue": {"median": 0.14, "p20": 0.13, "p80": 0.15, "min": 0.12, "max": 0.16},
            "flush": {"median": 0.06, "p20": 0.05, "p80": 0.07, "min": 0.05, "max": 0.07},
            "device": {"median": 0.32, "p20": 0.31, "p80": 0.33, "min": 0.30, "max": 0.34},
        },
    }


def test_a_sane_measurement_has_no_problems() -> None:
    assert sanity.measurement_problems(_latency(), metric="latency", floor_ns=1000.0) == []


def test_every_real_result_in_the_demo_data_is_sane() -> None:
    checked = 0
    for path in REAL_RESULTS:
        document = json.loads(path.read_text())
        payload = document.get("payload") or {}
        if document.get("kind") != "RerunResult" or payload.get("status") not in (
            "ok",
            "incorrect",
        ):
            continue
        elapsed = sanity.elapsed_seconds(payload.get("startedAt"), payload.get("finishedAt"))
        problems = sanity.measurement_problems(
            payload["measurement"], metric=payload["metric"], elapsed_s=elapsed
        )
        assert problems == [], (path.name, problems)
        checked += 1
    assert checked > 100


@pytest.mark.parametrize("value", [-1, 0, -5.0, 0.0, float("nan"), float("inf"), -float("inf"),
                                   10**400, "1", True, None])  # fmt: skip
@pytest.mark.parametrize("field", ["median", "p20", "p80"])
def test_every_quantile_must_be_a_finite_positive_number(field: str, value) -> None:
    measurement = _latency()
    measurement[field] = value
    problems = sanity.measurement_problems(measurement, metric="latency")
    assert any(f"measurement.{field}" in p for p in problems), problems


@pytest.mark.parametrize("key", ["values", "samples"])
def test_every_sample_is_checked(key: str) -> None:
    measurement = _latency()
    measurement[key] = [0.34, -0.1, float("nan")]
    problems = sanity.measurement_problems(measurement, metric="latency")
    assert f"measurement.{key}[1] is -0.1: a measured time or size is above zero" in problems
    assert f"measurement.{key}[2] is not finite (nan)" in problems


@pytest.mark.parametrize("block", sanity.DIAGNOSTIC_TIMINGS)
@pytest.mark.parametrize("field", ["median", "p20", "p80", "min", "max"])
def test_every_diagnostic_timing_is_checked(block: str, field: str) -> None:
    measurement = _latency()
    measurement["diagnostics"][block][field] = -1
    problems = sanity.measurement_problems(measurement, metric="latency")
    assert any(f"diagnostics.{block}.{field}" in p for p in problems), problems


@pytest.mark.parametrize("field", ["median", "p20", "p80", "min", "max"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), "0.3"])
def test_a_device_time_by_difference_must_still_be_finite_numbers(field: str, value) -> None:
    measurement = _latency()
    measurement["diagnostics"]["device"].update(method="cuda-graph", **{field: value})
    problems = sanity.measurement_problems(measurement, metric="latency")
    assert any(f"diagnostics.device.{field}" in p for p in problems), problems


def test_a_device_time_repeat_at_or_below_zero_is_a_measured_difference() -> None:
    """A 6 us softmax measured against a 60 us flush (h200-2026-12-01c, job 0199): one of ten
    graph-replay differences came out below zero. The result is sane; the device time it
    carries is not one the server can use (its repeats disagree)."""
    measurement = _latency()
    device = {
        "median": 0.006396797299385071,
        "p20": 0.00573183536529541,
        "p80": 0.006585603952407837,
        "min": -0.009772801399230957,
        "max": 0.00697600245475769,
        "method": "cuda-graph",
    }
    measurement["diagnostics"]["device"] = device
    assert sanity.measurement_problems(measurement, metric="latency") == []
    from kirunner import diagnose

    assert diagnose.repeats_consistent(device) is False
    # A median at or below zero is refused, difference or not.
    measurement["diagnostics"]["device"] = {**device, "median": -0.001, "p20": -0.002}
    assert sanity.measurement_problems(measurement, metric="latency") == [
        "diagnostics.device.median is -0.001: a measured time or size is above zero"
    ]
    # The same figures from a method that is no difference are refused.
    measurement["diagnostics"]["device"] = {**device, "method": "profiler-gpu-busy"}
    assert sanity.measurement_problems(measurement, metric="latency") == [
        "diagnostics.device.min is -0.009772801399230957: a measured time or size is above zero"
    ]


def test_quantiles_out_of_order_are_refused() -> None:
    measurement = _latency()
    measurement.update(p20=0.36, median=0.34, p80=0.33)
    assert sanity.measurement_problems(measurement, metric="latency") == [
        "measurement: p20 0.36, median 0.34, p80 0.33 are not in order"
    ]
    device = _latency()
    device["diagnostics"]["device"].update(min=0.5)
    assert sanity.measurement_problems(device, metric="latency") == [
        "diagnostics.device: min 0.5 is above its quantiles"
    ]


def test_a_median_outside_its_samples_is_refused() -> None:
    measurement = _latency()
    measurement["samples"] = [1.0, 1.1, 1.2]
    problems = sanity.measurement_problems(measurement, metric="latency")
    assert problems == ["measurement.median 0.34 lies outside its samples (1.0 to 1.2)"]


def test_below_the_plausibility_floor_is_refused_median_and_device_time() -> None:
    problems = sanity.measurement_problems(_latency(), metric="latency", floor_ns=335_000.0)
    assert len(problems) == 1 and problems[0].startswith("the device time 3.2e+05 ns is below")
    problems = sanity.measurement_problems(_latency(), metric="latency", floor_ns=400_000.0)
    assert [p.split(" ns")[0] for p in problems] == [
        "the median 3.4e+05",
        "the device time 3.2e+05",
    ]


def test_a_median_longer_than_the_job_or_overflowing_is_refused() -> None:
    measurement = _latency()
    measurement.update(median=2000.0, p20=2000.0, p80=2000.0, samples=[2000.0])
    assert sanity.measurement_problems(measurement, metric="latency", elapsed_s=60) == []
    problems = sanity.measurement_problems(measurement, metric="latency", elapsed_s=1.5)
    assert problems and "longer than the job that timed it" in problems[0]
    huge = {"unit": "ms", "median": 1e308}
    assert "longer than the job" in sanity.measurement_problems(huge, metric="latency")[0]


def test_memory_figures_and_the_device_memory_ceiling() -> None:
    memory = {"unit": "MiB", "median": 596.0, "p20": 596.0, "p80": 596.0, "samples": [596.0]}
    assert sanity.measurement_problems(memory, metric="memory", memory_bytes=80 * 2**30) == []
    big = copy.deepcopy(memory) | {"median": 90_000.0, "p20": 90_000.0, "p80": 90_000.0,
                                   "samples": [90_000.0]}  # fmt: skip
    problems = sanity.measurement_problems(big, metric="memory", memory_bytes=80 * 2**30)
    assert problems and "exceeds the device's memory" in problems[0]
    negative = copy.deepcopy(memory) | {"details": {"baselineBytes": -1}}
    assert sanity.measurement_problems(negative, metric="memory") == [
        "details.baselineBytes is -1: a byte count is 0 or more"
    ]


def test_a_unit_of_the_other_metric_or_no_measurement_is_refused() -> None:
    assert sanity.measurement_problems(_latency(), metric="memory")[0].startswith("unit 'ms'")
    assert sanity.measurement_problems(None, metric="latency") == [
        "the result carries no measurement"
    ]


def test_elapsed_seconds() -> None:
    assert sanity.elapsed_seconds("2026-11-30T10:00:00.000Z", "2026-11-30T10:01:30.500Z") == 90.5
    assert sanity.elapsed_seconds(None, "2026-11-30T10:00:00Z") is None
    assert sanity.elapsed_seconds("2026-11-30T10:00:00", "2026-11-30T10:01:00") is None

"""Are a result's figures physically possible? Checks on the numbers a measurement carries.

A signature proves who sent a result, not that its figures make sense: a correctly signed
median of -1 ms is still impossible. These checks run before anything is recorded, on every
figure a measurement carries: the median and its quantiles, the quantile values list, the raw
samples, the host-enqueue, flush and device-time diagnostics, and memory figures. Each figure
must be a finite number, positive (a time or a peak allocation of zero or less was not
measured), in order (p20 <= median <= p80, min <= p20, p80 <= max, the median inside the
samples), below a ceiling (a call cannot take longer than the job that timed it; a peak cannot
exceed the device's memory), and a latency's median and device time not below the
physical-plausibility floor: the fewest bytes the call must move over the GPU's peak memory
bandwidth. The floor is the caller's to compute (the server has runs/reference/plausibility.py;
this module knows no kernels) and is skipped when the caller has none.

Plain Python on plain dicts, no Django and no torch: the server's result path, uploaded result
files and the runner itself can all call it. `measurement_problems` returns every problem
found, in words, so a rejection says why; an empty list means the figures are sane.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any

# Result units -> nanoseconds or bytes, as the server stores them.
UNIT_SCALE = {"ms": 1e6, "us": 1e3, "ns": 1.0, "MiB": 2.0**20, "B": 1.0}
LATENCY_UNITS = {"ms", "us", "ns"}
MEMORY_UNITS = {"MiB", "B"}
# Used when the caller knows neither the job's wall time nor the device's memory: no kernel
# call timed by a rerun takes a day, and no GPU holds a pebibyte.
LATENCY_CEILING_NS = 86_400e9
MEMORY_CEILING_BYTES = float(2**50)
# Quantiles computed in float32 (torch.quantile) may land an ulp outside the samples they
# interpolate; order checks allow that much and no more.
ORDER_SLACK = 1e-6
DIAGNOSTIC_TIMINGS = ("hostEnqueue", "flush", "device")
# The cold device time by CUDA graphs is a difference: a replay of (flush, call) x n minus a
# replay of (flush) x n. For a call much shorter than the flush (a 6 us softmax against a
# 60 us flush) one repeat can come out at or below zero; that repeat was measured, and says
# the method cannot resolve the call, not that the result is forged. Its figures need only be
# finite and in order, and the median above zero; the server uses a device time only when its
# repeats agree (runs/evidence.py), so an unresolved one gives no verdict.
DIFFERENCE_TIMINGS = {("device", "cuda-graph")}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def figure_problem(name: str, value: Any, *, positive: bool = True) -> str | None:
    """Why `value` cannot be a measured time or size, or None: a finite number above zero
    (of either sign where `positive` is false: one repeat of a difference, DIFFERENCE_TIMINGS)."""
    if not _is_number(value):
        return f"{name} is not a number ({value!r})"
    try:
        as_float = float(value)
    except OverflowError:  # an int beyond float range
        return f"{name} is too large to be a measurement ({str(value)[:20]}...)"
    if not math.isfinite(as_float):
        return f"{name} is not finite ({value!r})"
    if positive and as_float <= 0:
        return f"{name} is {value!r}: a measured time or size is above zero"
    return None


def order_problem(p20: Any, median: Any, p80: Any, *, where: str = "") -> str | None:
    """Why p20 <= median <= p80 does not hold, or None (figures that are not numbers are
    figure_problem's to report)."""
    if not all(_is_number(v) for v in (p20, median, p80)):
        return None
    slack = ORDER_SLACK * abs(float(median))
    if p20 > median + slack or median > p80 + slack:
        prefix = f"{where}: " if where else ""
        return f"{prefix}p20 {p20!r}, median {median!r}, p80 {p80!r} are not in order"
    return None


def _figures(where: str, values: Iterable[tuple[str, Any]], *, difference: bool) -> list[str]:
    problems = []
    for name, value in values:
        # One repeat of a difference may fall at or below zero; its median may not (a median
        # at or below zero resolved nothing, and is no time).
        positive = not difference or name == "median"
        problem = figure_problem(f"{where}{name}", value, positive=positive)
        if problem:
            problems.append(problem)
    return problems


def _quantiles(
    where: str, block: dict, required: tuple[str, ...], *, difference: bool = False
) -> list[str]:
    """median, p20, p80, min and max of one timing block: `required` ones and those present."""
    names = [n for n in ("median", "p20", "p80", "min", "max") if n in block or n in required]
    problems = _figures(where, ((n, block.get(n)) for n in names), difference=difference)
    if problems:
        return problems
    where = where.rstrip(".")
    order = order_problem(block.get("p20"), block.get("median"), block.get("p80"), where=where)
    if order:
        problems.append(order)
    low, high = block.get("min"), block.get("max")
    ends = [v for v in (block.get("p20"), block.get("median")) if v is not None]
    if low is not None and ends and low > min(ends) + ORDER_SLACK * abs(min(ends)):
        problems.append(f"{where}: min {low!r} is above its quantiles")
    tops = [v for v in (block.get("p80"), block.get("median")) if v is not None]
    if high is not None and tops and high < max(tops) - ORDER_SLACK * abs(max(tops)):
        problems.append(f"{where}: max {high!r} is below its quantiles")
    return problems


def _samples(measurement: dict) -> list[str]:
    problems = []
    for key in ("values", "samples"):
        values = measurement.get(key)
        if values is None:
            continue
        if not isinstance(values, list):
            problems.append(f"measurement.{key} is not a list")
            continue
        bad = [p for i, v in enumerate(values) if (p := figure_problem(f"{key}[{i}]", v))]
        problems.extend(f"measurement.{p}" for p in bad[:3])
        if len(bad) > 3:
            problems.append(f"measurement.{key}: {len(bad) - 3} more figures like these")
    samples, median = measurement.get("samples"), measurement.get("median")
    if isinstance(samples, list) and samples and not problems and not figure_problem("", median):
        slack = ORDER_SLACK * abs(float(median))
        if not min(samples) - slack <= median <= max(samples) + slack:
            problems.append(
                f"measurement.median {median!r} lies outside its samples "
                f"({min(samples)!r} to {max(samples)!r})"
            )
    return problems


def measurement_problems(
    measurement: Any,
    *,
    metric: str,
    floor_ns: float | None = None,
    elapsed_s: float | None = None,
    memory_bytes: float | None = None,
) -> list[str]:
    """Every reason the figures of `measurement` (a RerunResult's payload.measurement) cannot
    be a real measurement of `metric` ("latency" or "memory"); [] when they are sane.

    floor_ns: the latency's plausibility floor in ns, from the caller (None: not known).
    elapsed_s: the job's wall time, where the result says when it started and finished.
    memory_bytes: the device's memory, the ceiling of a peak allocation.
    """
    if not isinstance(measurement, dict):
        return ["the result carries no measurement"]
    unit = measurement.get("unit")
    units = LATENCY_UNITS if metric == "latency" else MEMORY_UNITS
    if unit not in units:
        return [f"unit {unit!r} is not a {metric} unit ({', '.join(sorted(units))})"]
    problems = _quantiles("measurement.", measurement, ("median",))
    problems += _samples(measurement)
    diagnostics = measurement.get("diagnostics")
    if isinstance(diagnostics, dict):
        for name in DIAGNOSTIC_TIMINGS:
            block = diagnostics.get(name)
            if isinstance(block, dict):
                difference = (name, block.get("method")) in DIFFERENCE_TIMINGS
                problems += _quantiles(f"diagnostics.{name}.", block, (), difference=difference)
    details = measurement.get("details")
    baseline = details.get("baselineBytes") if isinstance(details, dict) else None
    if baseline is not None and (not _is_number(baseline) or baseline < 0):
        problems.append(f"details.baselineBytes is {baseline!r}: a byte count is 0 or more")
    if figure_problem("median", measurement.get("median")):
        return problems
    scaled = float(measurement["median"]) * UNIT_SCALE[unit]
    if metric == "latency":
        problems += _latency_bounds(scaled, measurement, floor_ns, elapsed_s)
    else:
        ceiling = memory_bytes or MEMORY_CEILING_BYTES
        if scaled > ceiling:
            problems.append(
                f"a peak of {scaled:.4g} bytes exceeds the device's memory ({ceiling:.4g} bytes)"
            )
    return problems


def _latency_bounds(
    median_ns: float, measurement: dict, floor_ns: float | None, elapsed_s: float | None
) -> list[str]:
    problems = []
    ceiling = LATENCY_CEILING_NS
    if elapsed_s is not None and elapsed_s > 0:
        ceiling = min(ceiling, elapsed_s * 1e9)
    if median_ns > ceiling:
        problems.append(
            f"a median of {median_ns:.4g} ns is longer than the job that timed it "
            f"({ceiling:.4g} ns)"
        )
    if floor_ns is None or floor_ns <= 0:
        return problems
    timed = [("median", median_ns)]
    device = (measurement.get("diagnostics") or {}).get("device")
    if isinstance(device, dict) and _is_number(device.get("median")):
        timed.append(("device time", float(device["median"]) * UNIT_SCALE["ms"]))
    for name, value in timed:
        if value < floor_ns:
            problems.append(
                f"the {name} {value:.4g} ns is below the physical floor {floor_ns:.4g} ns (the "
                "fewest bytes this call moves at the GPU's peak memory bandwidth)"
            )
    return problems


def elapsed_seconds(started: Any, finished: Any) -> float | None:
    """finishedAt - startedAt of a result in seconds, or None where either is missing or not
    an ISO 8601 time with a zone."""
    try:
        start = datetime.fromisoformat(str(started).replace("Z", "+00:00"))
        end = datetime.fromisoformat(str(finished).replace("Z", "+00:00"))
        seconds = (end - start).total_seconds()
    except (TypeError, ValueError, OverflowError):
        return None
    if start.tzinfo is None or end.tzinfo is None:
        return None
    return seconds

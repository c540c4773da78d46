"""What a latency result needs to judge itself: is `do_bench` timing the GPU or the host?

`do_bench` zeroes a 256 MiB buffer before each timed call and records the start event right
after it. The GPU runs the flush while the host enqueues the call; if the host needs longer to
enqueue the call than the GPU needs for the flush, the GPU sits idle between the start event
and the call's first kernel, and the figure is the host's enqueue time, not the kernel's. On a
slow or busy host (ours, or the source's CI) that is most short kernels.

So beside the protocol-faithful `do_bench` samples the runner measures, on CUDA only:

- ``hostEnqueueMs``: wall time to enqueue one call, many calls back to back with no
  synchronisation between them (grads reset before each, as `do_bench` does);
- ``flushMs``: the GPU time of one L2 flush (the same 256 MiB buffer zeroed), back to back;
- ``deviceMs``: the **cold device time**, the call's GPU time after a flush with no launch
  gaps. A CUDA graph that replays (flush, call) n times, minus one that replays n flushes,
  divided by n; repeated, with its spread. The graph is built on a fresh case on a side stream
  (so that a backward pass whose forward ran at setup is on the capturing stream too). Where
  the closure cannot be captured (a host synchronisation, an allocation the capture refuses),
  the reason is kept and the fallback is the profiler: per call after a flush, the summed
  durations of the GPU activities CUPTI recorded, minus the flush, which no host gap can
  lengthen (a call that synchronises with the host, as liger's cross entropy does, has gaps
  inside it that events would count). Whether a call synchronises is found before capturing,
  with torch's sync debug mode: a capture that fails part-way poisons the process.
  docs/runner.md justifies both;
- ``clocks``: NVML clocks, temperature and throttle reasons before and after;
- ``classification``: :func:`classify` over those numbers, with the numbers that decided it.

Nothing here imports Django: `runs.evidence` imports :func:`classify` and the thresholds, so
server and runner apply one rule.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "DEVICE_BOUND_RATIO",
    "REPEAT_SPREAD_LIMIT",
    "THROTTLE_REASONS",
    "classify",
    "cold_device_time",
    "flush_time",
    "host_enqueue_time",
    "nvml_state",
    "repeats_consistent",
    "throttled",
]

# do_bench's median within 15 % of the cold device time: do_bench timed the GPU.
DEVICE_BOUND_RATIO = 1.15
# Device-time repeats whose p20-p80 spread exceeds this share of their median disagree with
# each other (gap-free graph replays repeat within about 2 % on an idle H200): no verdict rests
# on them. The range (max - min) is recorded too but not used: one slow replay of ten is noise.
REPEAT_SPREAD_LIMIT = 0.10
# NVML clock-event reasons that mean the clocks were held down by power or heat (idle, the
# application-clock setting and sync boost are not throttling). The software power cap is
# special: a kernel that draws the card's rated power (a 20 ms SwiGLU on an H200 does) runs at
# the power limit on every host, upstream's too, so it throttles only when the enforced limit
# is below the product's default limit.
POWER_CAP = 0x4
THROTTLE_REASONS = {
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
}

Closure = Callable[[], Any]


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    point = q * (len(sorted_values) - 1)
    lo = int(point)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (point - lo) * (sorted_values[hi] - sorted_values[lo])


def summary(values: Sequence[float]) -> dict[str, Any]:
    """Median, p20, p80, min, max and the relative range of a list of timings (ms)."""
    s = sorted(values)
    med = statistics.median(s)
    return {
        "median": med,
        "p20": _quantile(s, 0.2),
        "p80": _quantile(s, 0.8),
        "min": s[0],
        "max": s[-1],
        "n": len(s),
        "relativeRange": (s[-1] - s[0]) / med if med > 0 else None,
    }


def repeats_consistent(device: dict[str, Any]) -> bool:
    med, p20, p80 = device.get("median"), device.get("p20"), device.get("p80")
    if not all(isinstance(v, int | float) for v in (med, p20, p80)) or med <= 0:
        return False
    low = device.get("min")
    if isinstance(low, int | float) and low <= 0:
        # A repeat of the graph difference at or below zero: the method did not resolve the
        # call on every repeat (kirunner/sanity.py, DIFFERENCE_TIMINGS).
        return False
    return (p80 - p20) / med <= REPEAT_SPREAD_LIMIT


def classify(
    *, do_bench_ms: float, device_ms: float, host_enqueue_ms: float, flush_ms: float
) -> dict[str, Any]:
    """device-bound, host-bound or unexplained, with the numbers that decided it.

    1. do_bench's median within DEVICE_BOUND_RATIO of the cold device time: device-bound.
    2. Otherwise, if the host needs longer to enqueue one call than the GPU needs for the
       flush, the GPU waited for the host between the events: host-bound.
    3. Otherwise the gap is not the host's enqueue time: unexplained (no timing verdict).
    """
    ratio = do_bench_ms / device_ms if device_ms > 0 else None
    facts = {
        "doBenchMs": do_bench_ms,
        "deviceMs": device_ms,
        "hostEnqueueMs": host_enqueue_ms,
        "flushMs": flush_ms,
        "doBenchOverDevice": ratio,
        "deviceBoundRatio": DEVICE_BOUND_RATIO,
    }
    if ratio is not None and 1 / DEVICE_BOUND_RATIO <= ratio <= DEVICE_BOUND_RATIO:
        kind = "device-bound"
        why = (
            f"do_bench {do_bench_ms * 1e3:.1f} us is within {DEVICE_BOUND_RATIO - 1:.0%} of the "
            f"device time {device_ms * 1e3:.1f} us"
        )
    elif ratio is not None and ratio > DEVICE_BOUND_RATIO and host_enqueue_ms > flush_ms:
        kind = "host-bound"
        why = (
            f"do_bench {do_bench_ms * 1e3:.1f} us is {ratio:.2f}x the device time "
            f"{device_ms * 1e3:.1f} us, and the host needs {host_enqueue_ms * 1e3:.1f} us to "
            f"enqueue one call, longer than the {flush_ms * 1e3:.1f} us flush it overlaps: the "
            "GPU waited for the host"
        )
    elif ratio is not None and ratio > DEVICE_BOUND_RATIO:
        kind = "unexplained"
        why = (
            f"do_bench {do_bench_ms * 1e3:.1f} us is {ratio:.2f}x the device time "
            f"{device_ms * 1e3:.1f} us, yet the host enqueues a call in "
            f"{host_enqueue_ms * 1e3:.1f} us, within the {flush_ms * 1e3:.1f} us flush"
        )
    else:
        kind = "unexplained"
        why = (
            f"do_bench {do_bench_ms * 1e3:.1f} us is faster than the device time "
            f"{device_ms * 1e3:.1f} us by more than {DEVICE_BOUND_RATIO - 1:.0%}"
        )
    return {"kind": kind, "why": why, **facts}


def throttled(clocks: dict[str, Any] | None) -> list[str]:
    """The throttle reasons NVML reported before or after the measurement, in words."""
    found: list[str] = []
    for when in ("before", "after"):
        reading = (clocks or {}).get(when)
        if not isinstance(reading, dict):
            continue
        mask = reading.get("clockEventReasons")
        if not isinstance(mask, int):
            continue
        limit, default = reading.get("powerLimitW"), reading.get("defaultPowerLimitW")
        lowered = isinstance(limit, int | float) and isinstance(default, int | float)
        lowered = lowered and limit < default
        for bit, name in THROTTLE_REASONS.items():
            if bit == POWER_CAP and not lowered:
                continue
            if mask & bit and name not in found:
                found.append(name)
    return found


def _reset(grad_to_none: Sequence[Any] | None) -> None:
    if grad_to_none is not None:
        for x in grad_to_none:
            x.grad = None


# Calls per enqueue block: 20 for calls up to 2 ms (a block of 40 ms), fewer for slower calls so
# that a block stays near 40 ms and never below one call. 100 calls of a 200 ms call (upstream's
# torch neighbourhood attention builds its mask in a Python loop) took 20 s a job and said no
# more than 5 did: a call that long is timed well by the wall clock once per block.
ENQUEUE_BLOCK_MS = 40.0


def _calls_within(budget_ms: float, call_ms: float, least: int, most: int) -> int:
    """How many calls of `call_ms` fit in `budget_ms`, between least and most."""
    return max(least, min(most, int(budget_ms / max(call_ms, 1e-3))))


def enqueue_calls(median_ms: float, most: int = 20) -> int:
    """How many calls a host-enqueue block makes, from do_bench's median for the call."""
    return _calls_within(ENQUEUE_BLOCK_MS, median_ms, 1, most)


# Device-time repeats: 10, fewer for calls over 300 ms so that they take about 3 s, and never
# fewer than 3 (a p20-p80 spread needs them). Upstream's CPO and SimPO scripts build a module on
# the CPU inside each 2.9 s call: ten repeats and their warm-up would be 40 s a job.
DEVICE_REPEATS_MS = 3000.0


def device_repeats(estimate_ms: float, most: int = 10, least: int = 3) -> int:
    """How many cold device-time repeats to take of a call of about `estimate_ms`."""
    return _calls_within(DEVICE_REPEATS_MS, estimate_ms, least, most)


def host_enqueue_time(
    fn: Closure, grad_to_none: Sequence[Any] | None, *, calls: int = 20, blocks: int = 5
) -> dict[str, Any]:
    """Wall time per call to enqueue `calls` calls back to back, no sync between them.

    Few enough calls that the launch queue never fills (a full queue would make the host wait
    for the GPU and turn this into device time); the median over blocks."""
    import torch

    per_call: list[float] = []
    for _ in range(blocks):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            _reset(grad_to_none)
            fn()
        per_call.append((time.perf_counter() - t0) * 1e3 / calls)
        torch.cuda.synchronize()
    return {**summary(per_call), "callsPerBlock": calls, "method": "time.perf_counter, no sync"}


def flush_time(cache: Any, *, flushes: int = 20, blocks: int = 5) -> dict[str, Any]:
    """GPU time of one flush: events around `flushes` back-to-back zeroings of the buffer
    (the host enqueues a zero_ far faster than the GPU writes 256 MiB, so no gaps)."""
    import torch

    per: list[float] = []
    for _ in range(blocks):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(flushes):
            cache.zero_()
        end.record()
        torch.cuda.synchronize()
        per.append(start.elapsed_time(end) / flushes)
    return {**summary(per), "method": f"CUDA events around {flushes} back-to-back flushes"}


class NotCapturable(Exception):
    """The call cannot be captured in a CUDA graph; found before any capture was tried."""


def _synchronises(fn: Closure, g2n: Sequence[Any] | None) -> str | None:
    """Run one call with torch's sync debug mode set to "error": a call that makes the host
    wait for the GPU (an .item(), a copy from pageable memory) raises, and says where.

    Such a call cannot be captured, and a capture that fails part-way leaves the process
    poisoned (its graph pool is never returned and the CUDA generator stays in capture mode,
    so every later random draw fails): it must be found before capturing, not by trying."""
    import torch

    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        _reset(g2n)
        fn()
    except RuntimeError as exc:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    finally:
        torch.cuda.set_sync_debug_mode(previous)
    return None


# Set by `kirunner batch` for a job whose kernel and pass already failed a capture part-way in
# an earlier process of the same batch: such a failure taints the process, and a closure that
# fails once fails again in the fresh process (fused_neighborhood_attention's backward did, at
# every workload, when it was the first job of a process), so each job would cost a process
# start. The profiler measures it instead, with this as the recorded reason.
_capture_refused: str | None = None


def refuse_capture(reason: str | None) -> None:
    """Skip the graph capture (and use the profiler) until called again with None."""
    global _capture_refused
    _capture_refused = reason


_SIDE_STREAMS: dict[int, Any] = {}


def _side_stream() -> Any:
    """One capturing stream per device and process. cuBLAS keeps a workspace per stream it
    has run on, allocated through torch's caching allocator and kept: with a new stream per
    job, "allocated at start" grew by 32-64 MiB after every matmul job of a batch (0 to
    1.07 GB after 20 geglu jobs), while a batch of 285 softmax and DyT jobs, which run no
    matmul, stayed at 0 bytes throughout."""
    import torch

    index = torch.cuda.current_device()
    if index not in _SIDE_STREAMS:
        _SIDE_STREAMS[index] = torch.cuda.Stream()
    return _SIDE_STREAMS[index]


def _graph_device_time(
    make: Callable[[], tuple[Closure, Sequence[Any] | None]],
    cache: Any,
    *,
    estimate_ms: float,
    repeats: int,
) -> dict[str, Any]:
    import torch

    stream = _side_stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn, g2n = make()
        # Warm up on the capturing stream: autograd and cuBLAS set up their state here, not
        # inside the capture.
        for _ in range(3):
            _reset(g2n)
            fn()
        sync = _synchronises(fn, g2n)
    stream.synchronize()
    if sync is not None:
        raise NotCapturable(f"the call synchronises with the host ({sync})")
    inner = max(1, min(20, int(2.0 / max(estimate_ms, 1e-3))))
    call_graph, flush_graph = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(call_graph, stream=stream):
        for _ in range(inner):
            _reset(g2n)
            cache.zero_()
            fn()
    with torch.cuda.graph(flush_graph, stream=stream):
        for _ in range(inner):
            cache.zero_()
    per_call: list[float] = []
    with torch.cuda.stream(stream):
        call_graph.replay()
        flush_graph.replay()
        for _ in range(repeats):
            times = []
            for graph in (call_graph, flush_graph):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                graph.replay()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            per_call.append((times[0] - times[1]) / inner)
    del call_graph, flush_graph, fn, g2n
    return {
        **summary(per_call),
        "method": "cuda-graph",
        "callsPerReplay": inner,
        "detail": "graph replay of (flush, call) x n minus (flush) x n, divided by n",
    }


def _gpu_busy_us(prof: Any) -> float:
    """Sum of the durations of the GPU activities (kernels, memsets, copies) CUPTI recorded."""
    from torch.autograd import DeviceType

    total = 0.0
    for ev in prof.events():
        if ev.device_type == DeviceType.CUDA:
            total += ev.time_range.elapsed_us()
    return total


def _profiled_device_time(
    make: Callable[[], tuple[Closure, Sequence[Any] | None]],
    cache: Any,
    *,
    flush_ms: float,
    repeats: int,
) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn, g2n = make()
    _reset(g2n)
    fn()
    torch.cuda.synchronize()
    per_call: list[float] = []
    for _ in range(repeats):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            _reset(g2n)
            cache.zero_()
            fn()
            torch.cuda.synchronize()
        per_call.append(_gpu_busy_us(prof) / 1e3 - flush_ms)
    del fn, g2n
    if min(per_call) <= 0:
        raise RuntimeError(f"the profiler recorded no GPU time beyond the flush: {per_call}")
    return {
        **summary(per_call),
        "method": "profiler-gpu-busy",
        "detail": "per call after a flush: the summed durations of the GPU activities CUPTI "
        "recorded (torch.profiler), minus the flush time; gaps between them do not count",
    }


def cold_device_time(
    make: Callable[[], tuple[Closure, Sequence[Any] | None]],
    cache: Any,
    *,
    estimate_ms: float,
    flush_ms: float,
    repeats: int = 10,
) -> dict[str, Any]:
    """The call's GPU time with a flushed L2 and no launch gaps; see the module docstring.

    `make` builds a fresh (fn, grad_to_none) for the call; it is called on the capturing
    stream. A result with ``processTainted`` came from a capture that failed part-way: the
    process must not measure anything else (kirunner batch starts a new one)."""
    import torch

    try:
        if _capture_refused is not None:
            raise NotCapturable(_capture_refused)
        return _graph_device_time(make, cache, estimate_ms=estimate_ms, repeats=repeats)
    except NotCapturable as exc:
        reason = str(exc)
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        return {
            "method": "none",
            "graphRefused": f"{type(exc).__name__}: {first}",
            "processTainted": True,
        }
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    try:
        out = _profiled_device_time(make, cache, flush_ms=flush_ms, repeats=repeats)
    except Exception as exc:
        return {
            "method": "none",
            "graphRefused": reason,
            "error": f"profiler: {type(exc).__name__}: {exc}",
        }
    out["graphRefused"] = reason
    return out


def nvml_state(index: int = 0) -> dict[str, Any] | None:
    """Clocks, temperature and clock-event (throttle) reasons from NVML; None without it."""
    from .nvml import started

    pynvml = started()
    if pynvml is None:
        return None
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        state: dict[str, Any] = {
            "smMHz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "memMHz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
            "temperatureC": pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
        }
        reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        if reasons is not None:
            mask = int(reasons(handle))
            state["clockEventReasons"] = mask
            state["reasons"] = [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
        for key, read in (
            ("powerW", pynvml.nvmlDeviceGetPowerUsage),
            ("powerLimitW", pynvml.nvmlDeviceGetEnforcedPowerLimit),
            ("defaultPowerLimitW", pynvml.nvmlDeviceGetPowerManagementDefaultLimit),
        ):
            try:
                state[key] = read(handle) / 1000
            except Exception:
                pass
        return state
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}

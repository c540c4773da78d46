"""Timing and memory measurement, faithful to Liger-Kernel's harness.

Latency on CUDA is ``triton.testing.do_bench`` as the scripts call it (warmup=25 ms,
rep=<script's value> ms, grad_to_none=..., quantiles=[0.5, 0.2, 0.8]) except that we ask
for ``return_mode="all"`` to keep every per-call time; the quantiles are then computed
with the rule triton applies (linear interpolation between order statistics). If the
installed triton lacks return_mode="all" (or triton is absent), :func:`_do_bench_replica`
runs the same loop: one call + sync, a 256 MiB int32 buffer, 5 calls (each after zeroing
the buffer) to estimate the time per call, n_warmup = max(1, int(25/est)), n_repeat =
max(1, int(rep/est)), then per call: grads in grad_to_none set to None, buffer zeroed
(flushes L2), CUDA events around the call, one sync at the end.

Memory is ``_test_memory`` from benchmark/scripts/utils.py: with the module and the inputs
resident, 10 times, reset the peak counter, call, read ``max_memory_allocated() / 2**20``
(MiB, labelled "MB" upstream); quantiles by ``torch.quantile`` on a float32 tensor, as
upstream (see :func:`memory_cuda` for what is resident).

On a CPU the latency loop is the same with ``time.perf_counter`` and no cache flush,
and the memory reading is the CPU allocator's live-bytes counter seen through the torch
profiler (see :func:`memory_cpu`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MEMORY_ITERATIONS",
    "WARMUP_MS",
    "Measured",
    "latency_cpu",
    "latency_cuda",
    "memory_cpu",
    "memory_cuda",
    "quantile_linear",
    "quantiles_torch_float32",
]

WARMUP_MS = 25  # do_bench's default; no Liger script overrides it
MEMORY_ITERATIONS = 10  # _test_memory's default _iter
L2_FLUSH_BYTES = 256 * 1024 * 1024  # triton's get_empty_cache_for_benchmark


@dataclass
class Measured:
    samples: list[float]
    quantiles: list[float]  # in the order asked for
    details: dict[str, Any] = field(default_factory=dict)


def quantile_linear(samples: Sequence[float], q: float) -> float:
    """triton.testing._quantile: linear interpolation, same as numpy/torch 'linear'."""
    if not samples:
        raise ValueError("no samples")
    if not 0 <= q <= 1:
        raise ValueError("quantiles must be in [0, 1]")
    a = sorted(samples)
    point = q * (len(a) - 1)
    lo, hi = math.floor(point), math.ceil(point)
    t = point - lo
    return (1 - t) * a[lo] + t * a[hi]


def quantiles_torch_float32(samples: Sequence[float], qs: Sequence[float]) -> list[float]:
    """What _test_memory returns: torch.quantile over a float32 tensor."""
    import torch

    values = torch.tensor(list(samples), dtype=torch.float)
    return torch.quantile(values, torch.tensor(list(qs), dtype=torch.float)).tolist()


def _reset_grads(grad_to_none: Sequence[Any] | None) -> None:
    if grad_to_none is not None:
        for x in grad_to_none:
            x.grad = None


def _do_bench_replica(
    fn: Callable[[], Any], *, warmup: float, rep: float, grad_to_none: Sequence[Any] | None
) -> tuple[list[float], dict[str, Any]]:
    import torch

    fn()
    torch.cuda.synchronize()
    cache = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        cache.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate_ms = start.elapsed_time(end) / 5
    n_warmup = max(1, int(warmup / estimate_ms)) if estimate_ms > 0 else 1000
    n_repeat = max(1, int(rep / estimate_ms)) if estimate_ms > 0 else 1000
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    for _ in range(n_warmup):
        fn()
    for i in range(n_repeat):
        _reset_grads(grad_to_none)
        cache.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]
    return times, {"estimateMs": estimate_ms, "nWarmup": n_warmup, "nRepeat": n_repeat}


def _supports_return_mode_all(do_bench: Callable[..., Any]) -> bool:
    """Whether this triton's do_bench accepts return_mode="all" (it asserts the mode
    before running anything; reading the source avoids mistaking a kernel's own
    AssertionError for an old triton)."""
    import inspect

    try:
        params = inspect.signature(do_bench).parameters
        source = inspect.getsource(do_bench)
    except (TypeError, ValueError, OSError):
        return False
    return "return_mode" in params and '"all"' in source


def latency_cuda(
    fn: Callable[[], Any],
    *,
    rep: float,
    quantiles: Sequence[float],
    grad_to_none: Sequence[Any] | None,
    warmup: float = WARMUP_MS,
    prefer_triton: bool = True,
) -> Measured:
    details: dict[str, Any] = {
        "warmupMs": warmup,
        "repMs": rep,
        "l2Flush": "256 MiB int32 buffer zeroed before every timed call",
        "quantileRule": "linear interpolation (triton.testing._quantile)",
    }
    times: list[float] | None = None
    if prefer_triton:
        try:
            import triton
            import triton.testing
        except Exception as exc:  # no triton: the replica is the same loop
            details["tritonUnavailable"] = f"{type(exc).__name__}: {exc}"
        else:
            if _supports_return_mode_all(triton.testing.do_bench):
                times = list(
                    triton.testing.do_bench(
                        fn, warmup=warmup, rep=rep, grad_to_none=grad_to_none, return_mode="all"
                    )
                )
                details["timerImpl"] = (
                    f"triton.testing.do_bench(return_mode='all') from triton {triton.__version__}"
                )
            else:
                details["tritonReturnModeAll"] = f"not supported by triton {triton.__version__}"
    if times is None:
        times, extra = _do_bench_replica(fn, warmup=warmup, rep=rep, grad_to_none=grad_to_none)
        details["timerImpl"] = (
            "kirunner.harness._do_bench_replica (triton do_bench loop, CUDA events)"
        )
        details.update(extra)
    details["nRepeat"] = len(times)
    return Measured(times, [quantile_linear(times, q) for q in quantiles], details)


def latency_cpu(
    fn: Callable[[], Any],
    *,
    rep: float,
    quantiles: Sequence[float],
    grad_to_none: Sequence[Any] | None,
    warmup: float = WARMUP_MS,
    max_samples: int = 1000,
    min_samples: int = 5,
) -> Measured:
    """do_bench's loop with time.perf_counter; no L2 flush (no device cache to flush).

    Unlike do_bench, the number of timed calls is kept within [min_samples, max_samples]:
    a noisy shared CPU can make the 5-call estimate exceed the whole rep budget (one
    sample, no spread), and a tiny CPU shape would otherwise yield tens of thousands of
    samples. Both bounds are recorded when they apply.
    """
    clock = time.perf_counter
    fn()
    t0 = clock()
    for _ in range(5):
        fn()
    estimate_ms = (clock() - t0) * 1e3 / 5
    n_warmup = max(1, int(warmup / estimate_ms)) if estimate_ms > 0 else 1000
    n_repeat = max(1, int(rep / estimate_ms)) if estimate_ms > 0 else 1000
    uncapped = n_repeat
    n_repeat = min(max(n_repeat, min_samples), max_samples)
    for _ in range(n_warmup):
        fn()
    times: list[float] = []
    for _ in range(n_repeat):
        _reset_grads(grad_to_none)
        t0 = clock()
        fn()
        times.append((clock() - t0) * 1e3)
    details = {
        "timerImpl": "kirunner.harness.latency_cpu (do_bench loop, time.perf_counter)",
        "warmupMs": warmup,
        "repMs": rep,
        "estimateMs": estimate_ms,
        "nWarmup": n_warmup,
        "nRepeat": n_repeat,
        "l2Flush": "none (CPU run)",
        "quantileRule": "linear interpolation (triton.testing._quantile)",
    }
    if n_repeat != uncapped:
        details["nRepeatFromBudget"] = uncapped
        details["nRepeatBounds"] = [min_samples, max_samples]
    return Measured(times, [quantile_linear(times, q) for q in quantiles], details)


MEMORY_PROTOCOL = "upstream-resident"


def memory_cuda(
    make_fn: Callable[[], Callable[[], Any]],
    *,
    quantiles: Sequence[float],
    foreign_bytes: int = 0,
    module_bytes: int = 0,
    iterations: int = MEMORY_ITERATIONS,
) -> Measured:
    """Upstream's `_test_memory`: with the module and the inputs resident (`make_fn` builds
    the inputs; the module was built before), ten times reset the peak counter, call, read
    `torch.cuda.max_memory_allocated() / 2**20`.

    Upstream reads the process's whole peak: the module, the inputs, what the call allocates,
    and the library workspaces its process made before (cuBLAS keeps one per handle and
    stream once created: on an H100, 32 MiB each, for the forward's thread and the autograd
    engine's). The runner reads the same, less `foreign_bytes`: what the runner process held
    when this job started, after a collection, an emptied allocator cache and cleared cuBLAS
    workspaces (kirunner.runner). That is nothing in a process of its own (a self-run), and
    what earlier jobs left in a batch, so a job reads the same in both. The workspaces this
    job's own calls make (its check and the warm-up as upstream's speed runs, before this)
    are resident and counted, as upstream's are. `module_bytes` (what building the module
    allocated) is recorded, not subtracted."""
    import torch

    fn = make_fn()
    resident = torch.cuda.memory_allocated() - foreign_bytes
    samples: list[float] = []
    # What the code asked for at each peak, before the caching allocator rounds a request up
    # to a cached block: upstream's own function read the same cell up to 1.25 MiB apart in
    # two calls that asked for the same bytes (bench/fidelity/h100-ab7fe2a/cells/README.md).
    requested: list[int] = []
    for _ in range(iterations):
        torch.cuda.memory.reset_peak_memory_stats()
        fn()
        samples.append((torch.cuda.max_memory_allocated() - foreign_bytes) / 2**20)
        requested.append(torch.cuda.memory_stats().get("requested_bytes.all.peak", 0))
    details = {
        "counter": "torch.cuda.max_memory_allocated() / 2**20 after reset_peak_memory_stats()",
        "protocol": MEMORY_PROTOCOL,
        "iterations": iterations,
        "quantileRule": "torch.quantile on float32 (as _test_memory)",
        "moduleBytes": module_bytes,
        "residentBytes": resident,
        "requestedPeakBytes": requested,  # per iteration, the process's own (foreign included)
    }
    if foreign_bytes:
        details["baselineBytes"] = foreign_bytes
        details["counter"] += ", minus what the process held when the job started"
    return Measured(samples, quantiles_torch_float32(samples, quantiles), details)


def _allocations_and_windows(
    prof: Any, marks: list[str]
) -> tuple[list[tuple[int, int]], dict[str, tuple[int, int]]]:
    """From a memory profile: every CPU allocation event as (time, live total), in time
    order, and each iteration marker's (start, end)."""
    try:
        tree = prof.profiler.kineto_results.experimental_event_tree()
    except AttributeError as exc:
        raise RuntimeError(f"this torch's profiler exposes no allocation events: {exc}") from exc

    allocs: list[tuple[int, int]] = []
    windows: dict[str, tuple[int, int]] = {}
    stack = list(tree)
    while stack:
        ev = stack.pop()
        stack.extend(ev.children)
        extra = ev.extra_fields
        if type(extra).__name__ == "_ExtraFields_Allocation":
            if str(extra.device).startswith("cpu"):
                allocs.append((ev.start_time_ns, int(extra.total_allocated)))
        elif ev.name in marks:
            windows[ev.name] = (ev.start_time_ns, ev.end_time_ns)
    if len(windows) != len(marks):
        raise RuntimeError("profiler lost iteration markers; cannot attribute allocations")
    allocs.sort()
    return allocs, windows


def memory_cpu(
    make_fn: Callable[[], Callable[[], Any]],
    *,
    quantiles: Sequence[float],
    iterations: int = MEMORY_ITERATIONS,
) -> Measured:
    """Peak live CPU-allocator bytes per call, the CPU stand-in for max_memory_allocated.

    torch has no peak counter for the CPU allocator, but with profile_memory=True every
    allocation and free is reported with the allocator's running total of live bytes
    ("total_allocated", counted from when profiling began). Setup runs inside the
    profiler so that inputs and weights count, as they do on the GPU. A call's peak is the
    highest total inside its record_function window, or the total on entry if it
    allocated nothing.
    """
    from torch.profiler import ProfilerActivity, profile, record_function

    marks = [f"kirunner_memory_iter_{i}" for i in range(iterations)]
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn = make_fn()
        for mark in marks:
            with record_function(mark):
                fn()

    allocs, windows = _allocations_and_windows(prof, marks)
    samples: list[float] = []
    for mark in marks:
        t0, t1 = windows[mark]
        before = [total for t, total in allocs if t < t0]
        inside = [total for t, total in allocs if t0 <= t <= t1]
        peak = max([before[-1] if before else 0, *inside])
        samples.append(peak / 2**20)
    return Measured(
        samples,
        quantiles_torch_float32(samples, quantiles),
        {
            "counter": "CPU allocator live bytes since setup began (torch profiler, profile_memory=True) / 2**20",
            "iterations": iterations,
            "quantileRule": "torch.quantile on float32 (as _test_memory)",
        },
    )

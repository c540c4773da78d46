"""Upstream's own memory function, one cell at a time, with the allocator's history controlled.

    cd <upstream checkout>/benchmark/scripts && \
        python3 /path/to/bench/fidelity/script_cells.py KERNEL [KERNEL ...] > cells.jsonl

A Liger-Kernel benchmark script measures every memory cell in one process, after all of its
speed cells: PyTorch's caching allocator then hands a request a cached block up to 1 MiB
larger than asked (a large-pool block is split only when more than 1 MiB would remain), and
`max_memory_allocated` counts the whole block. A cell's reading can therefore depend on what
ran before it in the process, not on the kernel. This tool runs the script's own
`bench_memory_*` function (found by running the script's `__main__` with `run_benchmarks`
recording its calls instead of measuring) for every memory cell, twice in a row:

- `fresh`: after `gc.collect()`, `torch.cuda.empty_cache()` and cleared cuBLAS workspaces,
  as the runner starts a job;
- `again`: at once after, with the cache the first call left.

Each is read the way upstream's `_test_memory` reads it (the same ten iterations and float32
quantiles; the script's own `_test_memory` is wrapped, not replaced), with
`requested_bytes.all.peak` beside it: what the code asked for, before the allocator's
rounding. One JSON line per cell and pass. Nothing of upstream's is changed on disk.

    python3 script_cells.py --whole KERNEL > whole.jsonl

runs the script itself (speed, then memory, in its one process) with the same wrapper, one line
per `_test_memory` call in the order the script makes them: the requested peak of the
script's own readings.
"""

from __future__ import annotations

import gc
import json
import os
import runpy
import sys
import time


def _wrap_test_memory(utils, torch, sink: dict) -> None:
    original = utils._test_memory

    def _test_memory(func, _iter=10, quantiles=None, return_mode="mean"):
        requested = []

        def counted():
            func()
            requested.append(torch.cuda.memory_stats()["requested_bytes.all.peak"] / 2**20)

        out = original(counted, _iter=_iter, quantiles=quantiles, return_mode=return_mode)
        sink["requested"] = requested
        return out

    utils._test_memory = _test_memory


def _memory_calls(script: str, utils) -> list[dict]:
    """The script's memory `run_benchmarks` calls, by running its __main__ with a recorder."""
    calls: list[dict] = []
    utils.run_benchmarks = lambda **kw: calls.append(kw)
    sys.argv = [script]
    runpy.run_path(script, run_name="__main__")
    return [c for c in calls if c.get("metric_name") == "memory"]


def _cells(call: dict):
    for config in call["extra_benchmark_configs"]:
        for x in call["x_values"]:
            for provider in call["kernel_providers"]:
                for mode in call["kernel_operation_modes"]:
                    yield x, provider, mode, config


def _upstream():
    """torch, upstream's benchmark/scripts/utils.py (the working directory) with its
    `_test_memory` wrapped, and the dict the wrapper leaves each call's requested peaks in."""
    import torch

    sys.path.insert(0, os.getcwd())
    import utils

    sink: dict = {}
    _wrap_test_memory(utils, torch, sink)
    return torch, utils, sink


def whole(kernel: str) -> None:
    _, utils, sink = _upstream()
    wrapped = utils._test_memory

    def _test_memory(*args, **kwargs):
        out = wrapped(*args, **kwargs)
        line = {"kernel": kernel, "y": out, "requestedMiB": sink["requested"]}
        print(json.dumps(line), flush=True)
        return out

    utils._test_memory = _test_memory
    sys.argv = [f"benchmark_{kernel}.py"]
    runpy.run_path(sys.argv[0], run_name="__main__")


def _measure(call: dict, cell: tuple, phase: str, torch, utils, sink: dict) -> dict:
    """One call of the script's memory function on one cell, as a line of the output."""
    x, provider, mode, config = cell
    if phase == "fresh":
        gc.collect()
        torch.cuda.empty_cache()
        torch._C._cuda_clearCublasWorkspaces()
    before = torch.cuda.memory_allocated() / 2**20
    t0 = time.perf_counter()
    out = call["bench_test_fn"](
        utils.SingleBenchmarkRunInput(
            x=x, kernel_provider=provider, kernel_operation_mode=mode, extra_benchmark_config=config
        )
    )
    return {
        "kernel": call["kernel_name"],
        "provider": provider,
        "mode": mode,
        "x_name": call["x_name"],
        "x": x,
        # as upstream's CSV writes it (extra_benchmark_config_str)
        "config": json.dumps(config, cls=utils.CustomEncoder),
        "phase": phase,
        "y50": out.y_50,
        "requestedMiB": sink.get("requested"),
        "allocatedBeforeMiB": before,
        "seconds": round(time.perf_counter() - t0, 2),
    }


def main(kernels: list[str]) -> None:
    torch, utils, sink = _upstream()
    for kernel in kernels:
        for call in _memory_calls(f"benchmark_{kernel}.py", utils):
            for cell in _cells(call):
                for phase in ("fresh", "again"):
                    line = _measure(call, cell, phase, torch, utils, sink)
                    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--whole":
        whole(sys.argv[2])
    else:
        main(sys.argv[1:])

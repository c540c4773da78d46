"""Quantile rules and the CPU timing loop."""

from __future__ import annotations

import json
import pathlib
import random
import subprocess
import sys

import pytest
import torch

from kirunner import harness


@pytest.mark.parametrize("n", [1, 2, 3, 10, 101, 1000])
def test_quantile_rule_matches_torch_linear(n: int) -> None:
    rng = random.Random(n)
    samples = [rng.lognormvariate(0, 1) for _ in range(n)]
    for q in (0.0, 0.2, 0.5, 0.8, 1.0):
        want = torch.quantile(torch.tensor(samples, dtype=torch.float64), q).item()
        assert harness.quantile_linear(samples, q) == pytest.approx(want, rel=1e-12)


def test_memory_quantiles_are_float32_like_test_memory() -> None:
    samples = [100.0, 100.5, 101.0, 99.0, 100.25, 100.0, 100.0, 102.0, 100.0, 98.5]
    got = harness.quantiles_torch_float32(samples, [0.5, 0.2, 0.8])
    want = torch.quantile(torch.tensor(samples), torch.tensor([0.5, 0.2, 0.8])).tolist()
    assert got == want


def test_cpu_loop_counts_and_resets_grads() -> None:
    x = torch.randn(64, requires_grad=True)
    calls = []

    def fn() -> None:
        calls.append(x.grad is None)
        (x * 2).sum().backward()

    m = harness.latency_cpu(fn, rep=5, quantiles=[0.5, 0.2, 0.8], grad_to_none=[x], max_samples=50)
    n = m.details["nRepeat"]
    assert 5 <= n <= 50 and len(m.samples) == n
    # every timed call starts with x.grad cleared, as do_bench's grad_to_none does
    assert all(calls[-n:])
    assert m.quantiles[1] <= m.quantiles[0] <= m.quantiles[2]


def test_cpu_loop_bounds_are_recorded() -> None:
    m = harness.latency_cpu(
        lambda: None, rep=50, quantiles=[0.5], grad_to_none=None, max_samples=20
    )
    assert len(m.samples) == 20
    assert m.details["nRepeatBounds"] == [5, 20] and m.details["nRepeatFromBudget"] > 20


_LIVE_TENSORS = """
import json, torch
from kirunner import harness

def make_fn():
    keep = torch.ones(2**18, dtype=torch.float32)  # 1 MiB alive through the loop

    def fn():
        tmp = torch.empty(2**19, dtype=torch.float32)  # 2 MiB transient
        tmp.fill_(1.0)
        keep.add_(0)

    return fn

print(json.dumps(harness.memory_cpu(make_fn, quantiles=[0.5, 0.2, 0.8]).samples))
"""


def test_cpu_memory_counts_live_tensors() -> None:
    # In a process of its own: the profiler's running total counts every thread's live
    # allocations, and a torch.compile earlier in the same process (tests/kirunner/test_families.py)
    # leaves about 0.1 MiB of them alive.
    done = subprocess.run(
        [sys.executable, "-c", _LIVE_TENSORS],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=pathlib.Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    samples = json.loads(done.stdout)
    assert len(samples) == harness.MEMORY_ITERATIONS
    # 1 MiB kept + 2 MiB peak inside each call
    assert all(s == pytest.approx(3.0, abs=0.01) for s in samples), samples


def test_return_mode_all_detection() -> None:
    def new_triton(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
        assert return_mode in ["min", "max", "mean", "median", "all"]

    def old_triton(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, fast_flush=True):
        return 0.0

    assert harness._supports_return_mode_all(new_triton)
    assert not harness._supports_return_mode_all(old_triton)


def _fake_cuda(monkeypatch, allocated: int) -> dict:
    """torch.cuda's allocation counters, as a dict the test moves."""
    import torch

    state = {"allocated": allocated, "peak": 0}
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a: state["allocated"])
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a: state["peak"])
    monkeypatch.setattr(
        torch.cuda.memory,
        "reset_peak_memory_stats",
        lambda *a: state.update(peak=state["allocated"]),
    )
    return state


def _job(state: dict, inputs: int, transient: int):
    """make_fn: allocates the inputs (resident from then on); its fn peaks `transient` above."""

    def make_fn():
        state["allocated"] += inputs

        def fn():
            state["peak"] = max(state["peak"], state["allocated"] + transient)

        return fn

    return make_fn


def test_cuda_peak_is_upstreams_whole_peak_less_what_the_process_held_at_the_jobs_start(
    monkeypatch,
) -> None:
    """200 MiB an earlier job left (foreign), then this job's module (100 MiB) and workspace
    (32 MiB) are resident when the measurement starts; its inputs (30 MiB) are allocated by
    make_fn and its call peaks 50 MiB above that. Upstream's _test_memory in a process of its
    own reads module + workspace + inputs + transient = 212 MiB; so does the runner, the
    earlier job's 200 MiB left out."""
    from kirunner import harness

    mib = 2**20
    state = _fake_cuda(monkeypatch, 200 * mib + 100 * mib + 32 * mib)
    m = harness.memory_cuda(
        _job(state, 30 * mib, 50 * mib),
        quantiles=[0.5],
        foreign_bytes=200 * mib,
        module_bytes=100 * mib,
    )
    assert m.samples == [212.0] * harness.MEMORY_ITERATIONS
    assert m.details["protocol"] == harness.MEMORY_PROTOCOL == "upstream-resident"
    assert m.details["residentBytes"] == (100 + 32 + 30) * mib  # module, workspace, inputs
    assert m.details["baselineBytes"] == 200 * mib
    assert m.details["moduleBytes"] == 100 * mib  # recorded, not subtracted


def test_cuda_peak_in_a_process_of_its_own_is_max_memory_allocated_itself(monkeypatch) -> None:
    """Nothing held before the job (a self-run): the reading is upstream's own,
    max_memory_allocated() / 2**20, and no baseline is recorded."""
    import torch

    from kirunner import harness

    mib = 2**20
    state = _fake_cuda(monkeypatch, 100 * mib + 32 * mib)
    m = harness.memory_cuda(_job(state, 30 * mib, 50 * mib), quantiles=[0.5, 0.2, 0.8])
    assert m.samples == [torch.cuda.max_memory_allocated() / 2**20] * harness.MEMORY_ITERATIONS
    assert m.samples[0] == 212.0
    assert "baselineBytes" not in m.details


def test_cuda_peak_is_the_same_whatever_an_earlier_job_left(monkeypatch) -> None:
    """The same job after 0, 300 MiB and 5 GiB of an earlier job's tensors reads the same:
    geglu liger forward at seq 2048 on an H100 (bench/fidelity), 258 MiB of weights, 64 MiB
    of cuBLAS workspaces, 128 MiB of input and 1160 MiB made by the call, as upstream's
    script reads it."""
    from kirunner import harness

    mib = 2**20
    readings = []
    for foreign in (0, 300 * mib, 5 * 1024 * mib):
        state = _fake_cuda(monkeypatch, foreign + 258 * mib + 64 * mib)
        m = harness.memory_cuda(
            _job(state, 128 * mib, 1160 * mib), quantiles=[0.5], foreign_bytes=foreign
        )
        readings.append(m.quantiles)
    assert readings[0] == readings[1] == readings[2] == [1610.0]

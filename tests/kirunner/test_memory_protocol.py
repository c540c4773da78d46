"""Peak memory as upstream's `_test_memory` reads it, the same in a batch and in a self-run.

The CUDA path cannot run here; its steps are checked with torch.cuda's counters replaced,
and that a batch and a job alone take the same path to it."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest
import torch

from kirunner import harness, runner

from .jobs import make_job

MIB = 2**20


def test_job_start_frees_earlier_workspaces_before_it_reads_what_the_process_holds(monkeypatch):
    """An earlier job left 300 MiB and two cuBLAS workspaces (64 MiB). The workspaces are
    freed first, so `allocatedAtStartBytes` (what the peak is read against) is 300 MiB: the
    workspaces this job's calls use are then made by this job and counted in its peak, as
    they are in upstream's process and in a self-run."""
    state = {"allocated": 364 * MIB, "events": []}

    def clear():
        state["events"].append("clear")
        state["allocated"] -= 64 * MIB

    def allocated(*a):
        state["events"].append("read")
        return state["allocated"]

    monkeypatch.setattr(torch._C, "_cuda_clearCublasWorkspaces", clear, raising=False)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "memory_allocated", allocated)
    monkeypatch.setattr(runner, "_freeze_survivors", lambda: None)
    import kirunner.env

    monkeypatch.setattr(kirunner.env, "capture_environment", lambda device_type: {})
    payload: dict = {}
    runner._environment(payload, "cuda", torch.device("cpu"))
    assert payload["environment"]["allocatedAtStartBytes"] == 300 * MIB
    assert state["events"] == ["clear", "read"]


def test_a_torch_without_the_workspace_call_is_left_alone(monkeypatch):
    monkeypatch.delattr(torch._C, "_cuda_clearCublasWorkspaces", raising=False)
    assert runner._clear_library_workspaces() is False


def _cuda_case(foreign: int, module_bytes: int = 0):
    spec_job = {"pass": "forward", "quantiles": [0.5, 0.2, 0.8]}
    device = types.SimpleNamespace(type="cuda", index=0)
    case = runner._Case(None, None, {}, device, spec_job, 7, module_bytes)
    case.foreign_bytes = foreign
    case.generator = lambda: None  # no CUDA generator here; the measurement is replaced
    return case


def test_memory_warms_up_as_upstreams_process_then_reads_against_the_jobs_start(monkeypatch):
    """One call of the full pass (the workspaces of the forward's and the autograd engine's
    threads), then _test_memory against what the process held when the job started."""
    events = []
    monkeypatch.setattr(runner, "_clocks", lambda case: None)
    monkeypatch.setattr(
        runner, "_warm_up_as_upstream", lambda case: events.append("warm-up") or "one call"
    )

    def memory_cuda(make_fn, **kwargs):
        events.append(("measure", kwargs["foreign_bytes"], kwargs["module_bytes"]))
        return harness.Measured([1.0], [1.0, 1.0, 1.0], {})

    monkeypatch.setattr(harness, "memory_cuda", memory_cuda)
    measured = runner._memory(_cuda_case(foreign=300 * MIB, module_bytes=258 * MIB))
    assert events == ["warm-up", ("measure", 300 * MIB, 258 * MIB)]
    assert measured.m.details["warmUp"] == "one call"
    assert measured.timer == "cuda_max_memory_allocated" and measured.unit == "MiB"


def test_warm_up_runs_the_full_pass_once_and_leaves_no_gradients(monkeypatch):
    """geglu's forward memory job: the warm-up runs forward and backward once (the script's
    speed runs did), then the module's gradients are reset, as upstream's memory run builds
    a fresh module."""
    from kirunner import protocol
    from kirunner.kernels import get_spec

    spec = get_spec("geglu")
    wl, _ = spec.resolve(make_job("geglu")["workload"]["parameters"])
    ran = spec.scale_down(wl)
    impl = spec.build(ran, "huggingface", torch.device("cpu"), "0.6.1")
    modes = []
    real = protocol.speed_closure

    def speed_closure(*args):
        modes.append(args[-1])
        return real(*args)

    monkeypatch.setattr(protocol, "speed_closure", speed_closure)
    monkeypatch.setattr(runner, "_free", lambda device_type: None)
    spec_job = {"pass": "forward", "quantiles": [0.5]}
    case = runner._Case(spec, impl, ran, torch.device("cpu"), spec_job, 11, 0)
    assert runner._warm_up_as_upstream(case) == "one call of the full pass"
    assert modes == ["full"]
    assert all(p.grad is None for p in impl.module.parameters())


def test_fused_linear_jsd_measures_in_the_cache_its_scripts_speed_cells_left(monkeypatch):
    """benchmark_fused_linear_jsd.py runs every speed cell first, in one process; the last
    (torch, BT 8192) leaves the cache full of free float32 (BT, V) blocks, 4,008 MiB at V
    128256, and every memory cell carves its tensors from them. From an emptied cache each
    501 MiB float32 (1024, V) tensor took a fresh 502 MiB segment whole: the runner read
    +11 MiB at torch BT 1024 on the H100. The warm-up now ends with the cache filled, after
    the emptying (which would give the blocks back)."""
    from kirunner.kernels import get_spec

    spec = get_spec("fused_linear_jsd")
    wl, _ = spec.resolve({"BT": 1024, "H": 4096, "V": 128256, "dtype": "bf16"})
    assert spec.script_cache_block(wl) == 4008 * MIB
    assert get_spec("geglu").script_cache_block({}) is None
    ran = spec.scale_down(wl)
    impl = spec.build(ran, "torch", torch.device("cpu"), "0.7.0")
    events = []
    monkeypatch.setattr(runner, "_free", lambda device_type: events.append("free"))
    monkeypatch.setattr(
        runner, "_fill_cache_as_script", lambda device, block: events.append(block) or 3
    )
    spec_job = {"pass": "full", "quantiles": [0.5]}
    case = runner._Case(spec, impl, ran, torch.device("cpu"), spec_job, 11, 0)
    what = runner._warm_up_as_upstream(case)
    assert events == ["free", 8192 * ran["V"] * 4]
    assert what.endswith(
        f"the cache filled with 3 free blocks of {8192 * ran['V'] * 4 / MIB:g} MiB"
    )


def test_distill_jsd_torch_measures_in_the_cache_its_scripts_speed_cells_left(monkeypatch):
    """benchmark_distill_jsd_loss.py's memory cells run after its speed cells, the last of them
    torch full at BT 8192, whose float32 (8192, V) blocks fill the cache. HFJSDLoss's float32
    (BT, V) tensors are carved from them there; from an emptied cache each 501 MiB one at BT
    1024 took a fresh 502 MiB segment (the runner read +9.0 MiB at BT 1024 on the H100). Only
    that provider's jobs are measured so: the cosine script's torch side and both liger
    sides keep the emptied cache, so the warm-up is told the job's provider."""
    from kirunner.kernels import get_spec

    jsd, cosine = get_spec("distill_jsd_loss"), get_spec("distill_cosine_loss")
    wl, _ = jsd.resolve({"BT": 1024, "H": 4096, "V": 128256, "dtype": "bf16"})
    assert jsd.script_cache_block(wl, "torch") == 4008 * MIB
    assert jsd.script_cache_block(wl, "liger") is None
    assert cosine.script_cache_block(wl, "torch") is None
    ran = jsd.scale_down(wl)
    impl = jsd.build(ran, "torch", torch.device("cpu"), "0.7.0")
    fills = []
    monkeypatch.setattr(runner, "_free", lambda device_type: None)
    monkeypatch.setattr(
        runner, "_fill_cache_as_script", lambda device, block: fills.append(block) or 2
    )
    spec_job = {"pass": "full", "quantiles": [0.5], "provider": "torch"}
    case = runner._Case(jsd, impl, ran, torch.device("cpu"), spec_job, 11, 0)
    runner._warm_up_as_upstream(case)
    assert fills == [8192 * ran["V"] * 4]


def test_the_cache_is_filled_until_the_device_is_full_then_freed(monkeypatch):
    made = []

    def empty(n, **kwargs):
        if len(made) == 3:
            raise torch.cuda.OutOfMemoryError("full")
        made.append(n)
        return object()

    monkeypatch.setattr(torch, "empty", empty)
    assert runner._fill_cache_as_script(torch.device("cpu"), 5 * MIB) == 3
    assert made == [5 * MIB] * 3


def test_a_batch_and_a_job_alone_take_the_same_memory_path(tmp_path: Path, monkeypatch) -> None:
    """`python -m kirunner JOB` (a self-run) and `batch` (here after another job) reach the
    same measurement with the same case: one code path. On the GPU both then read the same
    peak to the byte (bench/fidelity/h100-2026-12-05: four jobs self-run and in a batch)."""
    from kirunner.__main__ import main

    seen = []
    real = runner._memory

    def spy(case):
        seen.append((case.spec.name, case.mode, case.quantiles, case.ran, case.foreign_bytes))
        return real(case)

    monkeypatch.setattr(runner, "_memory", spy)
    monkeypatch.setattr(runner, "_freeze_survivors", lambda: None)
    paths = []
    for name, bench in (("0-geglu", "geglu"), ("1-swiglu", "swiglu")):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(make_job(bench, pass_="forward", metric="memory")))
    assert main(["batch", *map(str, paths), "--out-dir", str(tmp_path / "b"), "--cpu"]) == 0
    assert main([str(paths[1]), "--out", str(tmp_path / "alone.json"), "--cpu"]) == 0
    assert [s[0] for s in seen] == ["geglu", "swiglu", "swiglu"]
    assert seen[1] == seen[2]


@pytest.mark.parametrize("foreign", [0, 300 * MIB])
def test_baseline_is_recorded_only_where_the_process_held_something(monkeypatch, foreign):
    """The server refuses a peak that counts an earlier job's bytes unless the result says
    what it subtracted (`details.baselineBytes`): recorded whenever there was something."""
    state = {"allocated": foreign, "peak": 0}
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a: state["allocated"])
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a: state["peak"])
    monkeypatch.setattr(
        torch.cuda.memory, "reset_peak_memory_stats", lambda *a: state.update(peak=0)
    )
    m = harness.memory_cuda(lambda: lambda: None, quantiles=[0.5], foreign_bytes=foreign)
    assert ("baselineBytes" in m.details) == bool(foreign)


def test_the_requested_peak_is_kept_beside_each_reading(monkeypatch):
    """Each iteration's requested_bytes.all.peak, the bytes asked for before the allocator's
    rounding: the reading can move by a MiB with the process's history, this does not."""
    state = {"peak": 0, "requested": 0, "calls": 0}

    def call():
        state["calls"] += 1
        state["peak"] = 3 * MIB + (MIB if state["calls"] == 2 else 0)  # one rounded up
        state["requested"] = 3 * MIB - 4096

    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a: 0)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a: state["peak"])
    monkeypatch.setattr(torch.cuda, "memory_stats", lambda *a: {
        "requested_bytes.all.peak": state["requested"]})  # fmt: skip
    monkeypatch.setattr(
        torch.cuda.memory, "reset_peak_memory_stats", lambda *a: state.update(peak=0)
    )
    m = harness.memory_cuda(lambda: call, quantiles=[0.5], iterations=4)
    assert m.samples == [3.0, 4.0, 3.0, 3.0]
    assert m.details["requestedPeakBytes"] == [3 * MIB - 4096] * 4
    import jsonschema

    from kirunner.result_schema import MEASUREMENT

    jsonschema.validate({"details": m.details}, MEASUREMENT)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"details": {"requestedPeakBytes": [-1]}}, MEASUREMENT)

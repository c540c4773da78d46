"""Run one RerunJob and build its RerunResult payload.

Order of work, and why:
1. Validate the job and resolve the workload (cheap, fails fast with a clear message).
2. Pick the device. No CUDA, or ``force_cpu``: CPU mode with scaled-down shapes.
3. Build the implementation (imports transformers / liger_kernel lazily; a missing
   package or a GPU-only provider on a CPU becomes an "unavailable" result).
4. Correctness check at the shapes that will be measured; its tensors are freed before
   measuring so they do not count towards memory. It also warms up kernels (Triton
   compilation, cuBLAS workspace), much as upstream's speed runs warmed the process
   before its memory runs.
5. Measure (latency or memory) with fresh inputs allocated as the upstream setup does.
   A failed check does not stop the measurement: the numbers are real, the result says
   the implementation was wrong, and the server decides what to do with them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import os
import re
import secrets
import time
import traceback
import uuid
from collections.abc import Callable
from typing import Any

from .canonical import API_VERSION
from .impls import Unavailable
from .version import __version__
from .workload import WorkloadError

__all__ = ["API_VERSION", "JobError", "is_self_run", "run_job", "support_problem", "validate_job"]

PASSES = ("forward", "backward", "full", "no-grad-forward")
METRIC_ALIASES = {"latency": "latency", "speed": "latency", "memory": "memory"}
DEFAULT_QUANTILES = (0.5, 0.2, 0.8)
RELEASE = re.compile(r"^v?\d+\.\d+")
COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


class JobError(ValueError):
    """The job document is malformed or asks for something this runner cannot do."""


def is_self_run(job: Any) -> bool:
    """A job someone downloaded to run on their own GPU: it carries no nonce from a worker
    queue, and its result is never signed with a worker key (a worker key proves that a
    result came from a GPU KernelIndex controls, which a self-run never does)."""
    block = job.get("job") if isinstance(job, dict) else None
    return isinstance(block, dict) and block.get("selfRun") is True


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _get(doc: dict[str, Any], path: str) -> Any:
    cur: Any = doc
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            raise JobError(f"job is missing {path}")
        cur = cur[part]
    return cur


def validate_job(job: Any) -> dict[str, Any]:
    """Check the job's envelope and return the fields the runner uses, normalised."""
    if not isinstance(job, dict):
        raise JobError("job must be a JSON object")
    if job.get("apiVersion") != API_VERSION:
        raise JobError(f"apiVersion must be {API_VERSION!r}, got {job.get('apiVersion')!r}")
    if job.get("kind") != "RerunJob":
        raise JobError(f"kind must be 'RerunJob', got {job.get('kind')!r}")
    self_run = is_self_run(job)
    if self_run and _get(job, "job.nonce") is not None:
        raise JobError("a self-run job carries no nonce (job.nonce must be null)")
    out: dict[str, Any] = {
        "job_id": str(_get(job, "job.id")),
        "nonce": None if self_run else str(_get(job, "job.nonce")),
        "self_run": self_run,
        "public_id": str(_get(job, "run.publicId")),
        "benchmark": str(_get(job, "benchmark")),
        "pass": str(_get(job, "pass")),
        "provider": str(_get(job, "provider")),
    }
    metric = str(_get(job, "metric"))
    if metric not in METRIC_ALIASES:
        raise JobError(f"metric must be 'latency' or 'memory', got {metric!r}")
    out["metric"] = METRIC_ALIASES[metric]
    if out["pass"] not in PASSES:
        raise JobError(f"pass must be one of {', '.join(PASSES)}, got {out['pass']!r}")
    params = _get(job, "workload.parameters")
    if not isinstance(params, dict):
        raise JobError("workload.parameters must be an object")
    out["parameters"] = params
    protocol = job.get("protocol") or {}
    if not isinstance(protocol, dict):
        raise JobError("protocol must be an object")
    out.update(_protocol_fields(protocol))
    impl = job.get("implementation") or {}
    revision = (impl.get("revision") if isinstance(impl, dict) else None) or None
    # CI rows name the commit upstream ran (e.g. "02bac05") beside the version string that
    # checkout carried; a commit is no installable release (and read as a version it would
    # pick an arbitrary one), so the release named by the version string is asked for.
    if revision is not None and not RELEASE.match(str(revision)):
        out["commit"] = str(revision)
        revision = None
    out["revision"] = revision or protocol.get("ligerVersion") or None
    # The commit the row's script ran at, for every provider; jobs issued before the server
    # sent it carry it in a Liger row's revision only.
    commit = protocol.get("upstreamCommit")
    if commit is not None:
        if not isinstance(commit, str) or not COMMIT.match(commit):
            raise JobError(f"protocol.upstreamCommit must be a git commit id, got {commit!r}")
        out["commit"] = commit
    return out


def _protocol_fields(protocol: dict[str, Any]) -> dict[str, Any]:
    """The job's protocol block, checked: its quantiles and its rep."""
    family = protocol.get("family", "liger_kernel_bench")
    if family != "liger_kernel_bench":
        raise JobError(f"protocol family {family!r} is not supported (only liger_kernel_bench)")
    quantiles = protocol.get("quantiles", list(DEFAULT_QUANTILES))
    if (
        not isinstance(quantiles, list)
        or not quantiles
        or not all(
            isinstance(q, int | float) and not isinstance(q, bool) and 0 <= q <= 1
            for q in quantiles
        )
    ):
        raise JobError("protocol.quantiles must be a non-empty list of numbers in [0, 1]")
    rep = protocol.get("rep")
    if rep is not None and (isinstance(rep, bool) or not isinstance(rep, int | float) or rep <= 0):
        raise JobError("protocol.rep must be a positive number of milliseconds")
    return {"quantiles": [float(q) for q in quantiles], "rep": rep}


def support_problem(job: Any) -> str | None:
    """Why this runner cannot run `job`, in words, or None when it can. Cheap (no torch): the
    server asks it for every run page that offers a job file."""
    from .kernels import get_spec

    try:
        spec_job = validate_job(job)
        spec = get_spec(spec_job["benchmark"])
        if spec_job["provider"] not in spec.providers:
            return (
                f"{spec.name} has no provider {spec_job['provider']!r} in the upstream script "
                f"(providers: {', '.join(spec.providers)})"
            )
        spec.resolve(spec_job["parameters"])
    except (JobError, WorkloadError, Unavailable) as exc:
        return str(exc)
    return None


def _job_echo(job: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """job/run identifiers to echo even when the job is malformed."""
    j = job.get("job") if isinstance(job, dict) else None
    r = job.get("run") if isinstance(job, dict) else None
    j = j if isinstance(j, dict) else {}
    r = r if isinstance(r, dict) else {}
    echo = {"id": j.get("id"), "nonce": j.get("nonce")}
    if is_self_run(job):
        echo["selfRun"] = True
    return echo, {"publicId": r.get("publicId")}


def _free(device_type: str) -> None:
    gc.collect()
    if device_type == "cuda":
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def _clear_library_workspaces() -> bool:
    """Free the cuBLAS (and cuBLASLt) workspaces torch keeps per handle and stream; the next
    matmul on a handle and stream makes its own again. False where torch has no such call."""
    import torch

    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is None:
        return False
    torch.cuda.synchronize()
    clear()
    return True


def _freeze_survivors() -> None:
    """Move what survived the collection at a job's start out of the collector's reach.

    Those objects belong to the process, not to a job: modules, compiled kernels, caches.
    With torch and transformers imported they number about 350k, and every full collection
    walked them all (about 0.25 s each); a job makes six or more (the frees around its
    phases, and each CUDA-graph capture runs one), which was most of a short job's time.
    Frozen, a collection walks only the objects this job made, so its tensors are still
    freed between phases; nothing measured changes, and a collection that falls inside a
    timed call is shorter, not absent."""
    gc.freeze()


# One id per runner process: results that share it were measured by the same process, on
# the same host state (the claims rule compares two implementations only within one process).
PROCESS_ID = uuid.uuid4().hex

# The progress messages' first words, as the phase each starts (payload.phasesS).
_PHASE_OF = (
    ("reading", "environment"),
    ("building", "build"),
    ("checking", "check"),
    ("measuring", "measure"),
    ("diagnostics", "diagnostics"),
    ("device time", "deviceTime"),
)


class _Phases:
    """Seconds spent in each phase of one job, from the progress steps it announces."""

    def __init__(self, progress: Callable[[str], None] | None) -> None:
        self._progress = progress or (lambda step: None)
        self._t = time.monotonic()
        self._name = "validate"
        self.seconds: dict[str, float] = {}

    def _close(self) -> None:
        now = time.monotonic()
        self.seconds[self._name] = round(self.seconds.get(self._name, 0.0) + now - self._t, 3)
        self._t = now

    def step(self, text: str) -> None:
        self._close()
        self._name = next((key for word, key in _PHASE_OF if text.startswith(word)), "other")
        self._progress(text)

    def done(self) -> dict[str, float]:
        self._close()
        return self.seconds


def run_job(
    job: dict[str, Any],
    *,
    force_cpu: bool = False,
    rep: float | None = None,
    seed: int | None = None,
    cpu_max_samples: int = 1000,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the job; return the unsigned RerunResult document. Never raises for job-level
    problems: they end up in payload.error (and payload.status). `progress` is told each
    step as it starts (the command line prints it)."""
    started = _now()
    phases = _Phases(progress)
    job_echo, run_echo = _job_echo(job)
    payload: dict[str, Any] = {
        "job": job_echo,
        "run": run_echo,
        "benchmark": job.get("benchmark") if isinstance(job, dict) else None,
        "pass": job.get("pass") if isinstance(job, dict) else None,
        "metric": job.get("metric") if isinstance(job, dict) else None,
        "provider": job.get("provider") if isinstance(job, dict) else None,
        "status": "error",
        "device": None,
        "environment": {},
        "implementation": None,
        "workload": {"requested": None, "ran": None},
        "correctness": None,
        "measurement": None,
        "startedAt": started,
        "finishedAt": None,
        "runner": {"name": "kirunner", "version": __version__, "process": PROCESS_ID},
        "error": None,
    }
    try:
        _run(
            job,
            payload,
            force_cpu=force_cpu,
            rep_override=rep,
            seed=seed,
            cpu_max_samples=cpu_max_samples,
            progress=phases.step,
        )
    except Unavailable as exc:
        payload["status"] = "unavailable"
        payload["error"] = f"unavailable: {exc}"
    except (JobError, WorkloadError) as exc:
        payload["status"] = "invalid"
        payload["error"] = f"invalid job: {exc}"
    except Exception as exc:  # a crash in a kernel must still produce a result file
        payload["status"] = "error"
        tb = traceback.format_exc(limit=6)
        payload["error"] = f"{type(exc).__name__}: {exc}\n{tb}"
    payload["finishedAt"] = _now()
    payload["phasesS"] = phases.done()
    return {"apiVersion": API_VERSION, "kind": "RerunResult", "payload": payload, "signature": None}


def _run(
    job: dict[str, Any],
    payload: dict[str, Any],
    *,
    force_cpu: bool,
    rep_override: float | None,
    seed: int | None,
    cpu_max_samples: int,
    progress: Callable[[str], None],
) -> None:
    from .building import at_commit

    spec_job = validate_job(job)
    payload["metric"] = spec_job["metric"]
    payload["workload"]["requested"] = dict(spec_job["parameters"])
    # A family whose script changed between releases reads the row's commit (building.py).
    with at_commit(spec_job.get("commit")):
        _run_validated(spec_job, payload, force_cpu=force_cpu, rep_override=rep_override,
                       seed=seed, cpu_max_samples=cpu_max_samples, progress=progress)  # fmt: skip


def _run_validated(
    spec_job: dict[str, Any],
    payload: dict[str, Any],
    *,
    force_cpu: bool,
    rep_override: float | None,
    seed: int | None,
    cpu_max_samples: int,
    progress: Callable[[str], None],
) -> None:
    import torch

    from .check import run_check

    spec, wl, unused = _spec_and_workload(spec_job)
    device_type = "cuda" if (torch.cuda.is_available() and not force_cpu) else "cpu"
    device = (
        torch.device(device_type, torch.cuda.current_device())
        if device_type == "cuda"
        else torch.device("cpu")
    )
    payload["device"] = device_type
    progress(f"reading the {device_type} environment (driver, versions, clocks)")
    _environment(payload, device_type, device)
    ran = spec.scale_down(wl) if device_type == "cpu" else dict(wl)
    payload["workload"] = _workload_doc(spec_job, wl, ran, unused)

    progress(f"building {spec_job['provider']} {spec.name} at {ran}")
    impl, module_bytes = _build(payload, spec, spec_job, ran, device)

    # 48 bits: the seed is signed as a JSON number, which must stay below 2**53.
    seed = secrets.randbits(48) if seed is None else seed
    progress("checking correctness against the reference")
    check = run_check(spec, impl, ran, device, spec_job["pass"], seed)
    payload["correctness"] = check.as_json()
    _free(device_type)

    rep, rep_source = _rep(spec, spec_job, rep_override)
    what = f"{spec_job['metric']} of the {spec_job['pass']} pass"
    progress(
        f"measuring the {what}" + (f" (rep {rep:g} ms)" if spec_job["metric"] == "latency" else "")
    )
    case = _Case(spec, impl, ran, device, spec_job, seed, module_bytes)
    case.foreign_bytes = payload["environment"].get("allocatedAtStartBytes") or 0
    if spec_job["metric"] == "latency":
        measured = _latency(case, rep, cpu_max_samples, progress)
    else:
        measured = _memory(case)
    payload["measurement"] = _measurement_doc(spec, spec_job, measured, rep, rep_source)
    payload["status"] = "ok" if check.passed else "incorrect"
    if os.environ.get("TRITON_INTERPRET") == "1":
        payload["status"] = "dev-interpreter"


def _spec_and_workload(spec_job: dict[str, Any]) -> tuple[Any, dict[str, Any], Any]:
    from .kernels import get_spec

    spec = get_spec(spec_job["benchmark"])
    if spec_job["provider"] not in spec.providers:
        raise JobError(
            f"{spec.name} has no provider {spec_job['provider']!r} upstream (providers: {', '.join(spec.providers)})"
        )
    wl, unused = spec.resolve(spec_job["parameters"])
    return spec, wl, unused


def _environment(payload: dict[str, Any], device_type: str, device: Any) -> None:
    import torch

    from .env import capture_environment

    payload["environment"] = capture_environment(device_type)
    # In a batch, an earlier job's tensors (autograd graphs hold reference cycles) must be
    # gone before this one starts: they would count towards its peak memory and crowd out
    # its inputs. The reading is kept so a result shows what it started from.
    _free(device_type)
    _freeze_survivors()
    if device_type == "cuda":
        # cuBLAS workspaces an earlier job made are freed too: the ones this job's calls use
        # are then made by this job (its check and the memory warm-up), counted in its peak
        # as upstream's process counts its own, the same in a batch and in a self-run.
        _clear_library_workspaces()
        payload["environment"]["allocatedAtStartBytes"] = torch.cuda.memory_allocated(device)


def _workload_doc(
    spec_job: dict[str, Any], wl: dict[str, Any], ran: dict[str, Any], unused: Any
) -> dict[str, Any]:
    workload: dict[str, Any] = {
        "requested": dict(spec_job["parameters"]),
        "resolved": wl,
        "ran": ran,
    }
    if ran != wl:
        workload["scaledDown"] = "CPU run: sizes capped so the job finishes in seconds"
    if unused:
        workload["unusedParameters"] = unused
    return workload


def _build(
    payload: dict[str, Any], spec: Any, spec_job: dict[str, Any], ran: dict[str, Any], device: Any
) -> tuple[Any, int]:
    """The implementation, and the bytes building it allocated on the GPU (its weights)."""
    import torch

    revision = spec_job["revision"]
    cuda = device.type == "cuda"
    before = torch.cuda.memory_allocated(device) if cuda else 0
    impl = spec.build(ran, spec_job["provider"], device, revision)
    module_bytes = torch.cuda.memory_allocated(device) - before if cuda else 0
    impl_json = impl.info.as_json()
    if spec_job["provider"] == "liger":
        impl_json["requestedRevision"] = revision
    if "commit" in spec_job:  # the script's commit the measurement followed
        impl_json["upstreamCommit"] = spec_job["commit"]
    payload["implementation"] = impl_json
    if impl.info.package == "liger-kernel":
        # The release was imported from KIRUNNER_LIGER_ROOT, which package metadata
        # read at environment capture could not see.
        payload["environment"]["ligerKernel"] = impl.info.used_revision
    return impl, module_bytes


def _rep(spec: Any, spec_job: dict[str, Any], rep_override: float | None) -> tuple[float, str]:
    if rep_override is not None:
        return float(rep_override), "override"
    if spec_job["rep"] is not None:
        return float(spec_job["rep"]), "job"
    return float(spec.script_rep()), "upstream"


class _Case:
    """What one measurement needs: the kernel, its implementation, the workload it ran at,
    the device, the pass, the job's seed, the quantiles asked for and the bytes building the
    module allocated (its weights)."""

    def __init__(self, spec, impl, ran, device, spec_job, seed, module_bytes) -> None:
        self.spec, self.impl, self.ran, self.device = spec, impl, ran, device
        self.mode, self.quantiles = spec_job["pass"], spec_job["quantiles"]
        self.seed, self.module_bytes = seed, module_bytes
        self.provider = spec_job.get("provider")
        # What the process held when the job started (an earlier job's): not this job's.
        self.foreign_bytes = 0

    def generator(self) -> Any:
        import torch

        gen = torch.Generator(device=self.device)
        gen.manual_seed(self.seed + 1)
        return gen


def _clocks(case: _Case) -> Any:
    """The GPU clocks (kirunner.env) around a measurement; None on the CPU."""
    if case.device.type != "cuda":
        return None
    from .env import gpu_clocks

    return gpu_clocks(case.device.index or 0)


class _Measured:
    def __init__(self, m, timer, unit, diagnostics=None, power=None, clocks=None) -> None:
        self.m, self.timer, self.unit = m, timer, unit
        self.diagnostics, self.power, self.clocks = diagnostics, power, clocks


def _latency(
    case: _Case, rep: float, cpu_max_samples: int, progress: Callable[[str], None]
) -> _Measured:
    import torch

    # no-grad-forward: the scripts call do_bench inside torch.no_grad(); so is every timed
    # call here, the diagnostics' included.
    with torch.no_grad() if case.mode == "no-grad-forward" else contextlib.nullcontext():
        return _latency_in_mode(case, rep, cpu_max_samples, progress)


def _latency_in_mode(
    case: _Case, rep: float, cpu_max_samples: int, progress: Callable[[str], None]
) -> _Measured:
    from . import harness, protocol

    clocks_before = _clocks(case)
    fn, grad_to_none = protocol.speed_closure(
        case.spec, case.impl, case.ran, case.device, case.generator(), case.mode
    )
    if case.device.type == "cuda":
        measured = _latency_cuda(case, fn, grad_to_none, rep, progress)
        measured.clocks = {"before": clocks_before, "after": _clocks(case)}
        return measured
    m = harness.latency_cpu(
        fn,
        rep=rep,
        quantiles=case.quantiles,
        grad_to_none=grad_to_none,
        max_samples=cpu_max_samples,
    )
    del fn, grad_to_none
    absent = {"absent": "CPU run: no device time, host enqueue time, flush or GPU clocks"}
    return _Measured(m, "cpu_perf_counter", "ms", diagnostics=absent)


def _latency_cuda(
    case: _Case, fn: Any, grad_to_none: Any, rep: float, progress: Callable[[str], None]
) -> _Measured:
    from . import diagnose, harness, power

    index = case.device.index or 0
    nvml_before = diagnose.nvml_state(index)
    windows: dict[str, Any] = {}
    # Clocks, power and throttle reasons while do_bench times (kirunner/power.py).
    with power.Sampler(index) as sampler:
        m = harness.latency_cuda(fn, rep=rep, quantiles=case.quantiles, grad_to_none=grad_to_none)
    windows["doBench"] = sampler.window()
    median_ms = harness.quantile_linear(m.samples, 0.5)
    progress("diagnostics: host enqueue time")
    diagnostics = _diagnose_host(fn, grad_to_none, median_ms)
    # The device-time case is built afresh: free the do_bench one first, or the largest
    # workloads (16 GiB of logits) do not fit twice.
    del fn, grad_to_none
    _free("cuda")
    progress("device time: L2 flush and cold device time")
    with power.Sampler(index) as sampler:
        _diagnose_device(
            diagnostics,
            median_ms,
            case.seed,
            case.spec,
            case.impl,
            case.ran,
            case.device,
            case.mode,
        )
    windows["deviceTime"] = sampler.window()
    diagnostics["clocks"] = {
        "before": nvml_before,
        "after": diagnose.nvml_state(index),
        "source": "NVML (nvidia-ml-py)" if nvml_before else "unavailable: no NVML",
    }
    diagnostics["throttled"] = diagnose.throttled(diagnostics["clocks"])
    return _Measured(m, "cuda_events", "ms", diagnostics, windows)


def _memory(case: _Case) -> _Measured:
    from . import harness, protocol

    clocks_before = _clocks(case)
    gen = case.generator()

    def make_fn() -> Any:
        return protocol.memory_closure(case.spec, case.impl, case.ran, case.device, gen, case.mode)

    if case.device.type == "cuda":
        warm_up = _warm_up_as_upstream(case)
        m = harness.memory_cuda(
            make_fn,
            quantiles=case.quantiles,
            foreign_bytes=case.foreign_bytes,
            module_bytes=case.module_bytes,
        )
        m.details["warmUp"] = warm_up
        clocks = {"before": clocks_before, "after": _clocks(case)}
        return _Measured(m, "cuda_max_memory_allocated", "MiB", clocks=clocks)
    return _Measured(
        harness.memory_cpu(make_fn, quantiles=case.quantiles), "cpu_profiler_allocated", "MiB"
    )


def _warm_up_as_upstream(case: _Case) -> str:
    """Before a peak is read, one call of the full pass as the speed runs time it.

    Upstream's scripts run every speed pass before their memory runs, in the same process,
    so by then the library workspaces of the forward's thread and of the autograd engine's
    thread exist (cuBLAS: one per handle and stream) and are counted in the peak. A
    forward job's check runs no backward; this call makes the same workspaces here. The
    tensors it makes are freed and the module's gradients reset to None (upstream's
    memory run builds a fresh module, without gradients), before the measurement."""
    from . import protocol

    gen = case.generator()
    gen.manual_seed(case.seed + 2)
    what = "one call of the full pass"
    try:
        fn, _ = protocol.speed_closure(case.spec, case.impl, case.ran, case.device, gen, "full")
        fn()
    except Exception as exc:  # a pass this kernel's script never ran: its own closure then
        fn = protocol.memory_closure(case.spec, case.impl, case.ran, case.device, gen, case.mode)
        fn()
        what = f"one call of the measured closure (the full pass failed: {type(exc).__name__})"
    del fn
    if case.impl.module is not None:
        for p in case.impl.module.parameters():
            p.grad = None
    if case.spec.earlier_matmuls:
        _make_matmul_workspaces(case.device)
        what += ", then a matmul forward and backward (the workspaces of earlier cells)"
    _free("cuda")
    block = case.spec.script_cache_block(case.ran, case.provider)
    if block:
        n = _fill_cache_as_script(case.device, block)
        what += f", then the cache filled with {n} free blocks of {block / 2**20:g} MiB"
    return what


def _fill_cache_as_script(device: Any, block: int) -> int:
    """Leave the allocator's cache holding free blocks of `block` bytes, as many as the device
    has room for: the state the script's process reached its memory cells in, after speed
    cells whose tensors of that size filled the GPU. The measured pass's tensors are then
    carved from those blocks as the script's are, not given fresh segments. Returns how many."""
    import torch

    held = []
    try:
        while True:
            held.append(torch.empty(block, dtype=torch.uint8, device=device))
    except torch.cuda.OutOfMemoryError:
        pass  # the device is full: freed, the blocks stay cached (nothing empties it after)
    n = len(held)
    del held
    return n


def _make_matmul_workspaces(device: Any) -> None:
    """The cuBLAS workspaces of the forward's thread and of the autograd engine's thread, as a
    kernel's own matmuls would make them (one per handle and stream, whatever the size)."""
    import torch

    a = torch.ones(8, 8, device=device, requires_grad=True)
    (a @ a).sum().backward()


def _measurement_doc(
    spec: Any, spec_job: dict[str, Any], measured: _Measured, rep: float, rep_source: str
) -> dict[str, Any]:
    from . import harness

    m, quantiles = measured.m, spec_job["quantiles"]
    latency = spec_job["metric"] == "latency"
    script_rep = spec.script_rep()
    doc: dict[str, Any] = {
        "metric": spec_job["metric"],
        "unit": measured.unit,
        "quantiles": quantiles,
        "values": m.quantiles,
        "timer": measured.timer,
        "rep": rep if latency else None,
        "repSource": rep_source if latency else None,
        "upstreamRep": script_rep if latency else None,
        "iterations": len(m.samples),
        "samples": m.samples,
        "details": m.details,
    }
    # median/p20/p80 by name whenever the job asked for those quantiles (the default).
    for label, q in (("median", 0.5), ("p20", 0.2), ("p80", 0.8)):
        doc[label] = (
            m.quantiles[quantiles.index(q)]
            if q in quantiles
            else harness.quantile_linear(m.samples, q)
        )
    if rep_source == "job" and latency and rep != script_rep:
        doc["notes"] = [
            f"job rep {rep:g} ms differs from the upstream script's rep={script_rep} for {spec.name}"
        ]
    if measured.diagnostics is not None:
        doc["diagnostics"] = measured.diagnostics
    if measured.power:
        doc["power"] = measured.power
    if measured.clocks is not None:
        doc["clocks"] = measured.clocks
    return doc


def _diagnose_host(fn: Any, grad_to_none: Any, median_ms: float) -> dict[str, Any]:
    """Host enqueue time of the do_bench closure (kirunner.diagnose)."""
    from . import diagnose

    try:
        calls = diagnose.enqueue_calls(median_ms)
        return {"hostEnqueue": diagnose.host_enqueue_time(fn, grad_to_none, calls=calls)}
    except Exception as exc:  # a diagnostic must not cost the protocol figure
        return {"error": f"host enqueue: {type(exc).__name__}: {exc}"}


def _diagnose_device(
    out: dict[str, Any],
    median_ms: float,
    seed: int,
    spec: Any,
    impl: Any,
    ran: dict[str, Any],
    device: Any,
    mode: str,
) -> None:
    """Flush time, cold device time and the classification, into `out`. A failure here never
    loses the do_bench figure: it is recorded as the reason the diagnostics are missing, and
    the server then gives no timing verdict."""
    import torch

    from . import diagnose, harness, protocol

    if "error" in out:
        return
    try:
        cache = torch.empty(harness.L2_FLUSH_BYTES // 4, dtype=torch.int, device=device)
        out["flush"] = diagnose.flush_time(cache)

        def make() -> Any:
            gen = torch.Generator(device=device)
            gen.manual_seed(seed + 2)
            return protocol.speed_closure(spec, impl, ran, device, gen, mode)

        out["device"] = diagnose.cold_device_time(
            make,
            cache,
            estimate_ms=median_ms + out["flush"]["median"],
            flush_ms=out["flush"]["median"],
            repeats=diagnose.device_repeats(median_ms),
        )
        del cache
        _free("cuda")
    except Exception as exc:  # a diagnostic must not cost the protocol figure
        out["error"] = f"{type(exc).__name__}: {exc}"
        return
    device_ms = out["device"].get("median")
    if device_ms is not None:
        out["repeatsConsistent"] = diagnose.repeats_consistent(out["device"])
        out["classification"] = diagnose.classify(
            do_bench_ms=median_ms,
            device_ms=device_ms,
            host_enqueue_ms=out["hostEnqueue"]["median"],
            flush_ms=out["flush"]["median"],
        )

"""The environment a measurement really ran on (no hostname, no user, no paths)."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from typing import Any

from .impls import dist_version

__all__ = ["capture_environment", "gpu_clocks"]

_SMI_FIELDS = (
    "name",
    "driver_version",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "clocks.max.mem",
    "clocks.applications.graphics",
    "clocks.applications.memory",
    "power.limit",
    "temperature.gpu",
    "pstate",
    "memory.total",
)


def _smi_query(exe: str, index: int, fields: tuple[str, ...]) -> list[str] | None:
    try:
        out = subprocess.run(
            [
                exe,
                f"--id={index}",
                f"--query-gpu={','.join(fields)}",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=15,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    values = [v.strip() for v in out.splitlines()[0].split(",")] if out else []
    return values if len(values) == len(fields) else None


def _nvidia_smi(index: int) -> dict[str, str] | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    values = _smi_query(exe, index, _SMI_FIELDS)
    if values is None:
        # One field this driver does not know fails the whole query; ask one at a time.
        values = []
        for f in _SMI_FIELDS:
            one = _smi_query(exe, index, (f,))
            values.append(one[0] if one else "")
    found = {
        k: v
        for k, v in zip(_SMI_FIELDS, values, strict=True)
        if v and "N/A" not in v and "Not Supported" not in v
    }
    return found or None


def _nvml_clocks(index: int) -> dict[str, Any] | None:
    """gpu_clocks through NVML: microseconds, where nvidia-smi costs a process start (about a
    quarter of a second a call on the lent H200, twice per latency job)."""
    from .nvml import started

    pynvml = started()
    if pynvml is None:
        return None
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        return {
            "smMHz": int(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
            "memMHz": int(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)),
            "temperatureC": int(pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)),
            "pstate": f"P{int(pynvml.nvmlDeviceGetPerformanceState(h))}",
        }
    except Exception:
        return None


def gpu_clocks(index: int = 0) -> dict[str, Any] | None:
    """Current SM/memory clocks in MHz (read before and after a measurement): NVML when it is
    installed, else nvidia-smi."""
    nvml = _nvml_clocks(index)
    if nvml is not None:
        return nvml
    smi = _nvidia_smi(index)
    if smi is None:
        return None
    out: dict[str, Any] = {}
    for key, label in (
        ("clocks.sm", "smMHz"),
        ("clocks.mem", "memMHz"),
        ("temperature.gpu", "temperatureC"),
    ):
        if key in smi:
            try:
                out[label] = int(float(smi[key]))
            except ValueError:
                pass
    if "pstate" in smi:
        out["pstate"] = smi["pstate"]
    return out or None


_STATIC_SMI: dict[int, dict[str, str] | None] = {}


def _static_smi(index: int) -> dict[str, str] | None:
    """The driver, maximum and application clocks and the power limit do not change within a
    process: one nvidia-smi call per process, not one per job of a batch."""
    if index not in _STATIC_SMI:
        _STATIC_SMI[index] = _nvidia_smi(index)
    return _STATIC_SMI[index]


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _int_or_none(v: str | None) -> int | None:
    try:
        return int(float(v)) if v is not None else None
    except ValueError:
        return None


def capture_environment(device_type: str) -> dict[str, Any]:
    import torch

    env: dict[str, Any] = {
        "device": device_type,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        # Package versions from metadata: importing them just to read a version would
        # pull triton/transformers into processes that do not use them.
        "triton": dist_version("triton") or dist_version("pytorch-triton"),
        "transformers": dist_version("transformers"),
        "ligerKernel": dist_version("liger-kernel"),
        "cpu": _cpu_model(),
        "cpuCount": os.cpu_count(),
        "torchThreads": torch.get_num_threads(),
    }
    if device_type == "cuda":
        idx = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        env.update(
            gpuName=props.name,
            computeCapability=f"sm_{props.major}{props.minor}",
            smCount=props.multi_processor_count,
            gpuMemoryMiB=props.total_memory // 2**20,
            gpuCount=torch.cuda.device_count(),
            cudnn=torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
            allowTF32Matmul=bool(torch.backends.cuda.matmul.allow_tf32),
            # On by default in PyTorch, unlike matmuls': an fp32 convolution (the multi-token
            # attention lines) then computes in TF32, which the fp32 check bound can tell.
            allowTF32Cudnn=bool(torch.backends.cudnn.allow_tf32),
        )
        l2 = getattr(props, "L2_cache_size", None)
        if l2:
            env["l2CacheMiB"] = round(l2 / 2**20, 2)
        smi = _static_smi(idx)
        if smi:
            env["driver"] = smi.get("driver_version")
            env["clocks"] = {
                k: v
                for k, v in {
                    "maxSmMHz": _int_or_none(smi.get("clocks.max.sm")),
                    "maxMemMHz": _int_or_none(smi.get("clocks.max.mem")),
                    "applicationSmMHz": _int_or_none(smi.get("clocks.applications.graphics")),
                    "applicationMemMHz": _int_or_none(smi.get("clocks.applications.memory")),
                }.items()
                if v is not None
            }
            if "power.limit" in smi:
                env["powerLimitW"] = float(smi["power.limit"])
        else:
            env["driver"] = _driver_from_proc()
    env["pythonImplementation"] = sys.implementation.name
    return {k: v for k, v in env.items() if v is not None}


def _driver_from_proc() -> str | None:
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as fh:
            first = fh.readline()
    except OSError:
        return None
    for token in first.split():
        if token[:1].isdigit() and "." in token:
            return token
    return None

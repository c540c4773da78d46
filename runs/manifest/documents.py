"""Specs of the documents a Liger row implies. Pure functions: same row, same specs, same digests.

The protocol and environment specs reproduce the example run page byte for byte (its digests are
the test vector in tests/runs/manifest/test_digests.py); change a word here and every digest moves.
"""

from __future__ import annotations

import functools
from datetime import datetime

from runs.reference import catalogue

LIGER_REPOSITORY = "https://github.com/linkedin/Liger-Kernel"
LIGER_FAMILY = "liger_kernel_bench"

_TIMED = {
    "forward": "the module forward pass",
    "backward": "the backward pass (the forward pass is run untimed before it)",
    "full": "the forward and backward passes together",
    "no-grad-forward": "the module forward pass under torch.no_grad()",
}
_COMMON_NOTES = (
    "The upstream CSV records no CUDA, driver, or torch version; the Liger release rides each "
    "run's labels. Comparable only within one kernel, workload, timed pass, and GPU."
)


def protocol_spec(timed_pass: str, metric: str) -> tuple[str, str, dict]:
    """(name, title, spec) of the Liger harness protocol for one timed pass and metric."""
    if metric == "latency":
        notes = (
            f"Timed: {_TIMED[timed_pass]}, via triton.testing.do_bench with quantiles "
            f"0.5/0.2/0.8 (median with p20/p80 spread). {_COMMON_NOTES}"
        )
        timer = "cuda_events"
        name = f"liger-bench-do-bench-{timed_pass}"
        title = f"Liger benchmark harness · {timed_pass} pass"
    else:
        notes = (
            f"Measured: peak memory allocated by torch (torch.cuda.max_memory_allocated) "
            f"over repeated runs of {_TIMED[timed_pass]}, with quantiles 0.5/0.2/0.8; upstream "
            f"reports it in MB that are MiB (2^20 bytes). {_COMMON_NOTES}"
        )
        timer = "torch_cuda_max_memory_allocated"
        name = f"liger-bench-memory-{timed_pass}"
        title = f"Liger benchmark harness · peak memory, {timed_pass} pass"
    spec = {
        "harness": {"name": "Liger-Kernel benchmark scripts", "repository": LIGER_REPOSITORY},
        "measurement": {"timer": timer, "primaryStatistic": "median"},
        "comparability": {"notes": notes, "family": LIGER_FAMILY},
    }
    return name, title, spec


def environment_spec(gpu: catalogue.GpuSpec, software: dict | None = None) -> tuple[str, str, dict]:
    spec = {
        "hardware": {
            "vendor": gpu.vendor,
            "product": gpu.product,
            "formFactor": gpu.form_factor,
            "architecture": gpu.architecture,
        },
        "software": software or {},
    }
    short = gpu.upstream_name.removeprefix("NVIDIA ")
    return f"liger-bench-{gpu.slug}", f"Liger benchmark host · {short}", spec


def workload_spec(benchmark: str, params: dict) -> tuple[str, str, dict, list[dict] | None]:
    tensors = catalogue.input_tensors(benchmark, params)
    spec: dict = {
        "benchmark": benchmark,
        "parameters": params,
        "inputs": tensors if tensors is not None else "unknown",
        "definition": {"comparator": "not_asserted"},
    }
    slug = catalogue.workload_slug(params)
    return f"{benchmark}-{slug}"[:120], catalogue.workload_label(params), spec, tensors


def implementation_spec(provider_key: str, revision: str) -> tuple[str, str, dict]:
    p = catalogue.provider(provider_key)
    spec = {
        "project": p.project_name,
        "name": p.display_name,
        "provider": provider_key,
        "revision": revision,
    }
    return f"{provider_key}-{revision}"[:120], f"{p.display_name} @ {revision}", spec


@functools.lru_cache(maxsize=4096)
def iso_utc(moment: datetime) -> str:
    """2025-08-07T21:42:12.000Z: UTC, milliseconds, as the example manifest writes it."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


# Controlled reruns.


def controlled_protocol_spec(timed_pass: str, metric: str, timer: str) -> tuple[str, str, dict]:
    """The Liger harness re-implemented by KernelIndex's runner: same family, so a controlled
    run is comparable with the upstream rows of its cell; the timer is the one it really used
    (cuda_events on a GPU, cpu_perf_counter on a CPU)."""
    what = _TIMED.get(timed_pass, timed_pass)
    if metric == "latency":
        notes = (
            f"Timed: {what}, with the Liger benchmark scripts' setup re-implemented by the "
            f"KernelIndex runner and triton.testing.do_bench's method (rep as the upstream "
            f"script, quantiles 0.5/0.2/0.8). Outputs are checked against a float64 "
            f"reference before timing. Software versions are in the environment."
        )
    else:
        notes = (
            f"Measured: peak memory allocated over repeated runs of {what}, set up as the "
            f"Liger benchmark scripts do, quantiles 0.5/0.2/0.8, in bytes. Outputs are checked "
            f"against a float64 reference first."
        )
    spec = {
        "harness": {"name": "KernelIndex runner (Liger benchmark protocol)", "package": "kirunner"},
        "measurement": {"timer": timer, "primaryStatistic": "median"},
        "comparability": {"notes": notes, "family": LIGER_FAMILY},
    }  # fmt: skip
    name = f"kernelindex-rerun-{metric}-{timed_pass}-{timer}".replace("_", "-")
    title = f"KernelIndex rerun · {timed_pass} pass" + (
        " · peak memory" if metric == "memory" else ""
    )
    return name[:120], title, spec


def controlled_environment_spec(gpu: catalogue.GpuSpec, software: dict) -> tuple[str, str, dict]:
    """Hardware from the catalogue entry the result's GPU name matched; software as the
    runner recorded it (versions only: no host names, no paths)."""
    _, _, spec = environment_spec(gpu, software)
    short = gpu.upstream_name.removeprefix("NVIDIA ")
    label = ", ".join(f"{k} {v}" for k, v in sorted(software.items()) if k in ("torch", "cuda"))
    name = f"kernelindex-{gpu.slug}-" + "-".join(
        f"{k}{v}" for k, v in sorted(software.items()) if k in ("torch", "cuda")
    )
    return name[:120], f"KernelIndex rerun host · {short}" + (f" · {label}" if label else ""), spec

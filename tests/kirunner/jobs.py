"""Small RerunJob documents for the runner tests (CPU shapes come from scale-down)."""

from __future__ import annotations

import copy
import uuid
from typing import Any

# Upstream-like workloads, in the normalised names the server sends.
WORKLOADS: dict[str, dict[str, Any]] = {
    "llama4_rope": {"seq": 4096, "hidden": 8192, "q_heads": 32, "kv_heads": 8, "dtype": "bf16"},
    "rope": {"seq": 2048, "hidden": 4096, "q_heads": 32, "kv_heads": 8, "dtype": "bf16"},
    "rms_norm": {"M": 2048, "hidden": 4096, "eps": 1e-6, "dtype": "bf16"},
    "layer_norm": {"M": 4096, "hidden": 4096, "eps": 1e-6, "dtype": "fp32"},
    "swiglu": {
        "batch": 4,
        "seq": 1024,
        "hidden": 4096,
        "intermediate": 11008,
        "hidden_act": "silu",
        "dtype": "bf16",
    },
    "geglu": {
        "batch": 8,
        "seq": 1024,
        "hidden": 4096,
        "intermediate": 11008,
        "hidden_act": "gelu_pytorch_tanh",
        "dtype": "bf16",
    },
    "cross_entropy": {"batch": 8, "seq": 2048, "vocab": 4096},
}

KERNELS = tuple(WORKLOADS)


def make_job(
    benchmark: str = "rms_norm",
    *,
    provider: str = "huggingface",
    pass_: str = "full",
    metric: str = "latency",
    parameters: dict[str, Any] | None = None,
    rep: float | None = 400,
    revision: str = "0.6.1",
) -> dict[str, Any]:
    protocol: dict[str, Any] = {
        "family": "liger_kernel_bench",
        "harness": "liger-kernel-bench",
        "quantiles": [0.5, 0.2, 0.8],
        "ligerVersion": revision,
    }
    if rep is not None:
        protocol["rep"] = rep
    return {
        "apiVersion": "kernelindex.dev/v1alpha1",
        "kind": "RerunJob",
        "job": {
            "id": str(uuid.uuid4()),
            "nonce": uuid.uuid4().hex,
            "issuedAt": "2026-11-29T16:00:00Z",
            "gpuClass": "h200",
        },
        "run": {
            "publicId": "01a0202b",
            "source": "liger-kernel-bench",
            "externalId": f"{benchmark}/{pass_}/{provider}",
            "digest": "sha256:" + "0" * 64,
        },
        "benchmark": benchmark,
        "pass": pass_,
        "metric": metric,
        "provider": provider,
        "implementation": {"project": "Liger-Kernel", "revision": revision},
        "workload": {"parameters": copy.deepcopy(parameters or WORKLOADS[benchmark])},
        "protocol": protocol,
    }

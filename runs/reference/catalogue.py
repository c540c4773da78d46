"""Reference data: the GPU catalogue, benchmark titles, providers, and workload shapes.

GPU peaks are the vendors' datasheet figures: memory bandwidth in GB/s (10^9 bytes/s) and the
dense (no 2:4 sparsity) bf16 tensor-core rate with fp32 accumulation, in TFLOP/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    upstream_name: str
    slug: str
    vendor: str
    product: str
    form_factor: str
    architecture: str
    memory_gib: int
    peak_bandwidth_gbs: float
    peak_bf16_tflops: float
    gpu_class: str


GPUS: dict[str, GpuSpec] = {
    spec.upstream_name: spec
    for spec in [
        GpuSpec("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3", "nvidia", "NVIDIA H100",
                "80GB HBM3", "sm_90", 80, 3350, 989.4, "h100"),
        GpuSpec("NVIDIA H100 NVL", "nvidia-h100-nvl", "nvidia", "NVIDIA H100", "NVL", "sm_90",
                94, 3900, 835.5, "h100-nvl"),
        GpuSpec("NVIDIA H100 PCIe", "nvidia-h100-pcie", "nvidia", "NVIDIA H100", "PCIe", "sm_90",
                80, 2000, 756.5, "h100-pcie"),
        GpuSpec("NVIDIA H200", "nvidia-h200", "nvidia", "NVIDIA H200", "", "sm_90", 141, 4800,
                989.4, "h200"),
        GpuSpec("NVIDIA A100-SXM4-80GB", "nvidia-a100-sxm4-80gb", "nvidia", "NVIDIA A100",
                "SXM4-80GB", "sm_80", 80, 2039, 312, "a100"),
        GpuSpec("NVIDIA A100-SXM4-40GB", "nvidia-a100-sxm4-40gb", "nvidia", "NVIDIA A100",
                "SXM4-40GB", "sm_80", 40, 1555, 312, "a100-40gb"),
        GpuSpec("NVIDIA GeForce RTX 3090", "nvidia-geforce-rtx-3090", "nvidia",
                "NVIDIA GeForce RTX 3090", "", "sm_86", 24, 936, 35.6, "rtx3090"),
        GpuSpec("NVIDIA GeForce RTX 4090", "nvidia-geforce-rtx-4090", "nvidia",
                "NVIDIA GeForce RTX 4090", "", "sm_89", 24, 1008, 165.2, "rtx4090"),
        GpuSpec("NVIDIA B200", "nvidia-b200", "nvidia", "NVIDIA B200", "", "sm_100", 180, 8000,
                2250, "b200"),
    ]
}  # fmt: skip


BENCHMARK_TITLES = {
    "llama4_rope": "Llama 4 rotary position embedding",
    "rope": "Rotary position embedding",
    "rms_norm": "RMSNorm",
    "fused_add_rms_norm": "Fused residual add + RMSNorm",
    "layer_norm": "LayerNorm",
    "group_norm": "GroupNorm",
    "swiglu": "SwiGLU MLP",
    "geglu": "GeGLU MLP",
    "cross_entropy": "Cross-entropy loss",
    "fused_linear_cross_entropy": "Fused linear + cross-entropy loss",
    "softmax": "Softmax",
    "sparsemax": "Sparsemax",
    "embedding": "Embedding lookup",
    "jsd": "Jensen-Shannon divergence",
    "kl_div": "KL divergence",
    "tvd": "Total variation distance",
    "dyt": "Dynamic tanh",
    "fused_moe": "Fused mixture-of-experts",
    "fused_neighborhood_attention": "Fused neighborhood attention",
    "multi_token_attention": "Multi-token attention",
    "sparse_multi_token_attention": "Sparse multi-token attention",
    "relu_squared": "Squared ReLU",
}


def benchmark_title(slug: str) -> str:
    if slug in BENCHMARK_TITLES:
        return BENCHMARK_TITLES[slug]
    words = slug.replace("_", " ")
    return words[:1].upper() + words[1:]  # keep the rest as upstream spelt it (beta=False)


@dataclass(frozen=True)
class Provider:
    project_slug: str
    project_name: str
    project_url: str
    display_name: str


_PROJECTS = {
    "transformers": ("Hugging Face Transformers", "https://github.com/huggingface/transformers"),
    "liger-kernel": ("Liger-Kernel", "https://github.com/linkedin/Liger-Kernel"),
    "pytorch": ("PyTorch", "https://github.com/pytorch/pytorch"),
    "deepspeed": ("DeepSpeed", "https://github.com/deepspeedai/DeepSpeed"),
    "megatron-lm": ("Megatron-LM", "https://github.com/NVIDIA/Megatron-LM"),
}


def provider(key: str) -> Provider:
    """Map an upstream provider key (already normalised) to its project and display name."""
    if key == "huggingface":
        project, display = "transformers", "Transformers"
    elif key == "torch":
        project, display = "pytorch", "PyTorch"
    elif key == "torch_compile":
        project, display = "pytorch", "torch.compile"
    elif key == "liger":
        project, display = "liger-kernel", "Liger-Kernel"
    elif key.startswith("liger"):
        project, display = "liger-kernel", "Liger-Kernel (" + key.removeprefix("liger_") + ")"
    elif key.startswith("deepspeed"):
        project, display = "deepspeed", "DeepSpeed (" + key.removeprefix("deepspeed_") + ")"
    elif key.startswith("megatron"):
        project, display = (
            "megatron-lm",
            "Megatron-LM" + (f" ({key.removeprefix('megatron_')})" if key != "megatron" else ""),
        )
    else:
        project, display = key.replace("_", "-"), key
    name, url = _PROJECTS.get(project, (display, ""))
    return Provider(project, name, url, display)


# Upstream parameter names vary by script and by release (T, seq_len, L; H, hidden_size, N;
# B, bsz, batch_size); the workload uses one short name for each idea so that the same shape
# is the same workload whichever script wrote it.
PARAM_NAMES = {
    "T": "seq",
    "seq_len": "seq",
    "L": "seq",
    "H": "hidden",
    "hidden_size": "hidden",
    "num_q_heads": "q_heads",
    "num_kv_heads": "kv_heads",
    "num_heads": "heads",
    "B": "batch",
    "bsz": "batch",
    "batch_size": "batch",
    "BT": "bt",
    "intermediate_size": "intermediate",
}
# Names whose meaning depends on the axis label the script gave them.
LABELLED_PARAM_NAMES = {
    ("N", "hidden size"): "hidden",
    ("V", "vocab size"): "vocab",
}

DTYPES = {
    "torch.bfloat16": "bf16",
    "torch.float16": "fp16",
    "torch.float32": "fp32",
    "torch.float64": "fp64",
}
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8, "int64": 8}


def normalise_param(name: str, label: str = "") -> str:
    return LABELLED_PARAM_NAMES.get((name, label)) or PARAM_NAMES.get(name, name)


def param_order(name: str) -> tuple[int, int, str]:
    """Display order: dtype last, otherwise shortest name first (seq, hidden, q_heads, ...)."""
    return (1 if name == "dtype" else 0, len(name), name)


def workload_slug(params: dict) -> str:
    """hidden8192-kv_heads8-q_heads32-seq4096-bf16: sorted names, the dtype bare at the end."""
    parts = [f"{k}{_slug_value(v)}" for k, v in sorted(params.items()) if k != "dtype"]
    if "dtype" in params:
        parts.append(str(params["dtype"]))
    return "-".join(parts)


def workload_label(params: dict) -> str:
    """seq = 4096 · hidden = 8192 · q_heads = 32 · kv_heads = 8 · bf16"""
    parts = []
    for name in sorted(params, key=param_order):
        parts.append(str(params[name]) if name == "dtype" else f"{name} = {params[name]}")
    return " · ".join(parts)


def _slug_value(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def tensor(name: str, dtype: str, shape: list[int]) -> dict:
    return {"name": name, "dtype": dtype, "shape": shape}


def input_tensors(benchmark: str, params: dict) -> list[dict] | None:
    """The input tensors a kernel's upstream benchmark script builds from its parameters.

    None when the kernel's inputs are not known here; the page says so rather than guessing.
    Shapes follow Liger-Kernel's benchmark scripts. Scripts that set no dtype use fp32.
    """
    p = params
    dtype = p.get("dtype", "fp32")
    try:
        if benchmark in ("llama4_rope", "rope"):
            head_dim = p["hidden"] // p["q_heads"]
            if benchmark == "llama4_rope":
                q_shape = [1, p["seq"], p["q_heads"], head_dim]
                k_shape = [1, p["seq"], p["kv_heads"], head_dim]
            else:  # rope transposes to [batch, heads, seq, head_dim] before the kernel
                q_shape = [1, p["q_heads"], p["seq"], head_dim]
                k_shape = [1, p["kv_heads"], p["seq"], head_dim]
            return [tensor("q", dtype, q_shape), tensor("k", dtype, k_shape)]
        if benchmark in ("rms_norm", "layer_norm", "softmax"):
            inputs = [tensor("x", dtype, [p["M"], p["hidden"]])]
            if benchmark != "softmax":
                inputs.append(tensor("weight", dtype, [p["hidden"]]))
            return inputs
        if benchmark in ("swiglu", "geglu"):
            return [
                tensor("x", dtype, [p["batch"], p["seq"], p["hidden"]]),
                tensor("gate_proj.weight", dtype, [p["intermediate"], p["hidden"]]),
                tensor("up_proj.weight", dtype, [p["intermediate"], p["hidden"]]),
                tensor("down_proj.weight", dtype, [p["hidden"], p["intermediate"]]),
            ]
        if benchmark == "cross_entropy":
            rows = p["batch"] * p["seq"]
            return [tensor("logits", dtype, [rows, p["vocab"]]), tensor("target", "int64", [rows])]
    except (KeyError, TypeError, ZeroDivisionError):
        return None
    return None


def tensor_bytes(t: dict) -> int | None:
    size = DTYPE_BYTES.get(t["dtype"])
    return None if size is None else size * math.prod(t["shape"])

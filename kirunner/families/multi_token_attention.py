"""multi_token_attention and sparse_multi_token_attention:
benchmark/scripts/benchmark_multi_token_attention.py and
benchmark/scripts/benchmark_sparse_multi_token_attention.py at Liger-Kernel 02bac05.

Multi-token attention is `mask_0(conv2d(act(mask_-inf(scores))))` over attention scores
x `[B, C_in, L, L]`, with a causal mask, act softmax (multi_token_attention, bfloat16 in the
rows) or sparsemax (sparse_multi_token_attention, float32: liger's sparse path refuses
anything else), and a `K x K` convolution with padding `K // 2`, stride 1, `groups`.
dy = randn_like(x) drawn once after x (so C_out must equal C_in, as in every upstream config).
- `liger`: `LigerMultiTokenAttention(in_channels=C_in, out_channels=C_out, kernel_size=K,
  stride=1, padding=K // 2, dilation=1, groups, bias[, sparse=True]).to(device).to(dtype)`;
  its weights are kaiming-uniform (a=sqrt(5)) and its bias zeros (the sparse script draws
  them once more the same way);
- `torch`: the scripts' `TorchMultiTokenAttention` (masked_fill with -1e9, softmax, conv2d,
  masked_fill with 0, all in the input dtype) and `TorchSparseMultiTokenAttention` (the same
  in float32 around a sort-based sparsemax, cast back), written here with the same
  operations in the same order, weights created in the input dtype on the device and filled
  as upstream fills them, from the liger module's initialisation.
Forward `attn(x)`; backward `y.backward(dy, retain_graph=True)` on one forward (the sparse
script reuses its warm-up forward, the same graph); full a forward and that backward;
grad_to_none [x]; rep 100 (style `fixed_dy`). Memory: the same full closure, ten calls.

Upstream keeps both modules on the GPU in every run; only the one asked for is built here.
Their weights are C_out * C_in / groups * K * K elements (144 for the rows' configs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..building import Impl, KernelSpec, randn, torch_dtype, torch_info
from ..impls import load_liger
from ..workload import Param, WorkloadError


def _causal(L: int, device):
    import torch

    return torch.tril(torch.ones(L, L, dtype=torch.bool, device=device)).view(1, 1, L, L)


def _sort_sparsemax(z, L: int):
    """The sparse script's sparsemax over the last dimension, step for step."""
    import torch

    z_sorted, _ = torch.sort(z, dim=-1, descending=True)
    cum_sum = torch.cumsum(z_sorted, dim=-1)
    k_indices = torch.arange(1, L + 1, device=z.device, dtype=z.dtype).view(1, 1, 1, L)
    is_positive = z_sorted > -1e8
    condition = (1 + k_indices * z_sorted > cum_sum) & is_positive
    k_sparsemax = torch.sum(condition, dim=-1, keepdim=True)
    k_safe = torch.max(k_sparsemax, torch.ones_like(k_sparsemax))
    cum_sum_k = torch.gather(cum_sum, dim=-1, index=k_safe.long() - 1)
    tau = (cum_sum_k - 1) / k_safe.to(z.dtype)
    tau = torch.where(k_sparsemax == 0, torch.full_like(tau, float("inf")), tau)
    return torch.clamp(z - tau, min=0)


def torch_multi_token_attention(wl, device, sparse: bool):
    """The scripts' TorchMultiTokenAttention / TorchSparseMultiTokenAttention."""
    import torch
    import torch.nn.functional as F

    dtype, K, groups = torch_dtype(wl["dtype"]), wl["K"], wl["groups"]
    # The sparse baseline computes in float32 whatever the input dtype.
    compute = torch.float32 if sparse else dtype

    class TorchMultiTokenAttention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            shape = (wl["C_out"], wl["C_in"] // groups, K, K)
            self.weight = torch.nn.Parameter(torch.empty(shape, dtype=dtype, device=device))
            self.bias = (
                torch.nn.Parameter(torch.empty(wl["C_out"], dtype=dtype, device=device))
                if wl["bias"]
                else None
            )

        def forward(self, scores):
            L = scores.shape[-1]
            mask = _causal(L, scores.device)
            inf = torch.tensor(-1e9, device=scores.device, dtype=compute)
            zero = torch.tensor(0.0, device=scores.device, dtype=compute)
            if sparse:
                s_inf = scores.to(compute).masked_fill(~mask, inf)
                probs = _sort_sparsemax(s_inf, L)
                weight = self.weight.to(compute)
                bias = self.bias.to(compute) if self.bias is not None else None
            else:
                s_inf = scores.masked_fill(~mask, inf)
                probs = F.softmax(s_inf, dim=-1)
                weight, bias = self.weight, self.bias
            out_c = F.conv2d(probs, weight, bias, stride=1, padding=K // 2, groups=groups)
            out = out_c.masked_fill(~mask, zero)
            return out.to(scores.dtype) if sparse else out

    module = TorchMultiTokenAttention()
    with torch.no_grad():
        # What upstream copies in: LigerMultiTokenAttention's reset_parameters, drawn in
        # float32 and rounded to the module's dtype (liger's module is cast after init).
        w = torch.empty(module.weight.shape, dtype=torch.float32, device=device)
        torch.nn.init.kaiming_uniform_(w, a=math.sqrt(5))
        module.weight.copy_(w)
        if module.bias is not None:
            module.bias.zero_()
    return module


def sparsemax(z):
    """float64 sparsemax over the last dimension (Martins & Astudillo, 2016): the Euclidean
    projection onto the simplex, p = max(z - tau, 0)."""
    import torch

    n = z.shape[-1]
    z_sorted = torch.sort(z, dim=-1, descending=True).values
    cum = z_sorted.cumsum(dim=-1)
    k = torch.arange(1, n + 1, device=z.device, dtype=z.dtype)
    support = (1 + k * z_sorted > cum).sum(dim=-1, keepdim=True)
    tau = (cum.gather(-1, support - 1) - 1) / support.to(z.dtype)
    return torch.clamp(z - tau, min=0)


def reference_multi_token_attention(x, weight, bias, K: int, groups: int, sparse: bool):
    """float64 `mask_0(conv2d(act(mask_-inf(x))))` with a true -inf causal mask."""
    import torch.nn.functional as F

    future = ~_causal(x.shape[-1], x.device)
    scores = x.masked_fill(future, float("-inf"))
    probs = sparsemax(scores) if sparse else scores.softmax(dim=-1)
    out = F.conv2d(probs, weight, bias, stride=1, padding=K // 2, groups=groups)
    return out.masked_fill(future, 0.0)


@dataclass(frozen=True)
class MultiTokenAttentionSpec(KernelSpec):
    sparse: bool = False

    def validate(self, wl):
        if wl["C_in"] % wl["groups"] or wl["C_out"] % wl["groups"]:
            raise WorkloadError(f"{self.name}: C_in and C_out must be multiples of groups")
        if wl["C_out"] != wl["C_in"]:
            # dy = randn_like(x) is [B, C_in, L, L]; y is [B, C_out, L, L].
            raise WorkloadError(f"{self.name}: the script's dy is shaped like x, so C_out == C_in")
        if wl["K"] % 2 == 0:
            raise WorkloadError(f"{self.name}: K must be odd (padding K // 2 keeps L x L)")

    def make_inputs(self, wl, device, gen):
        shape = (wl["batch"], wl["C_in"], wl["seq"], wl["seq"])
        return {"x": randn(shape, torch_dtype(wl["dtype"]), device, gen)}

    def build(self, wl, provider, device, revision):
        import torch

        if provider == "torch":
            module = torch_multi_token_attention(wl, device, self.sparse)
            what = "TorchSparseMultiTokenAttention" if self.sparse else "TorchMultiTokenAttention"
            info = torch_info(
                f"{what} (Liger-Kernel {self.script.rsplit('/', 1)[-1]} at 02bac05, "
                "re-implemented in kirunner)"
            )
            return Impl(lambda v: (module(v["x"]),), info, module=module)
        if self.sparse and wl["dtype"] != "fp32":
            raise WorkloadError(f"{self.name}: liger's sparse multi-token attention is fp32 only")
        mod, info = load_liger(
            "liger_kernel.transformers.multi_token_attention",
            revision,
            device_type=torch.device(device).type,
        )
        extra = {"sparse": True} if self.sparse else {}
        module = mod.LigerMultiTokenAttention(
            in_channels=wl["C_in"],
            out_channels=wl["C_out"],
            kernel_size=wl["K"],
            stride=1,
            padding=wl["K"] // 2,
            dilation=1,
            groups=wl["groups"],
            bias=wl["bias"],
            **extra,
        )
        module = module.to(device).to(torch_dtype(wl["dtype"]))
        return Impl(lambda v: (module(v["x"]),), info, module=module)

    def reference(self, views, params, wl, impl):
        return (
            reference_multi_token_attention(
                views["x"], params["weight"], params.get("bias"), wl["K"], wl["groups"], self.sparse
            ),
        )


def _spec(name: str, script: str, sparse: bool) -> MultiTokenAttentionSpec:
    return MultiTokenAttentionSpec(
        name=name,
        script=f"benchmark/scripts/{script}",
        providers=("liger", "torch"),
        upstream_rep=100,
        style="fixed_dy",
        params=(
            Param("batch", ("B", "bsz", "batch_size")),
            Param("seq", ("L", "T", "seq_len"), help="L of the (B, C_in, L, L) scores"),
            Param("C_in", ("in_channels",)),
            Param("C_out", ("out_channels",)),
            Param("K", ("kernel_size",)),
            Param("groups"),
            Param("bias", kind="bool"),
            Param("dtype", kind="dtype"),
        ),
        inputs=("x",),
        outputs=("y",),
        small_caps={"batch": 2, "seq": 32},
        sparse=sparse,
    )


SPECS = (
    _spec("multi_token_attention", "benchmark_multi_token_attention.py", sparse=False),
    _spec("sparse_multi_token_attention", "benchmark_sparse_multi_token_attention.py", sparse=True),
)

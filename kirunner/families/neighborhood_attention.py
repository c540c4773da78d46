"""fused_neighborhood_attention: benchmark/scripts/benchmark_fused_neighborhood_attention.py
at Liger-Kernel 02bac05.

x `[batch_size, seq_len, hidden_size]` (float32 or bfloat16), dy = randn_like(x) drawn once
after it. Each query attends to the keys `i + m * dilation` for `|m| <= kernel_size // 2`
inside the sequence, with scale `1 / sqrt(hidden_size / num_heads)`. Both modules are built
`.to(device).to(dtype)`, so their weights are in the input's dtype:
- `liger`: `LigerFusedNeighborhoodAttention(hidden_size, num_heads, kernel_size, dilation,
  bias, dropout=0.0)` (liger_kernel.transformers.fused_neighborhood_attention);
- `torch`: the script's `TorchNeighborhoodAttention`, four `nn.Linear` projections around a
  dense `[seq, seq]` attention, written here with the same operations in the same order.
  Its forward builds the neighbourhood mask with a Python loop that sets one element of a
  device tensor per allowed (query, key) pair, `seq_len * kernel_size` small writes; upstream
  times that loop inside every forward (it is most of the torch provider's forward time at
  long sequences), and so does this runner.
Forward `attn(x)`; backward `y.backward(dy, retain_graph=True)` on one forward; full a forward
and that backward; grad_to_none [x]; rep 100 (style `fixed_dy`). Memory (`bench_memory_...`):
the same full closure, ten calls (`_test_memory`).

Upstream copies the liger module's weights into the torch module and keeps both on the GPU
in every run; here the provider asked for is built with `nn.Linear`'s own initialisation (the
distribution the copied weights were drawn from), and a module of the other's shapes is kept
beside it, so that peak memory, read as upstream reads it (the modules and inputs resident,
kirunner/harness.py), counts both modules' weights (4 * (hidden^2 + hidden) elements each:
4 MiB per module at hidden 512 fp32, 16 MiB at hidden 1024 fp32). Timing is unaffected.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..building import Impl, KernelSpec, randn, torch_dtype, torch_info
from ..impls import load_liger
from ..workload import Param, WorkloadError


def torch_neighborhood_attention(
    hidden: int, heads: int, kernel_size: int, dilation: int, bias: bool
):
    """The script's TorchNeighborhoodAttention (dropout 0.0: no dropout layer)."""
    import torch

    class TorchNeighborhoodAttention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.head_dim = hidden // heads
            self.scale = 1.0 / math.sqrt(self.head_dim)
            self.q_proj = torch.nn.Linear(hidden, hidden, bias=bias)
            self.k_proj = torch.nn.Linear(hidden, hidden, bias=bias)
            self.v_proj = torch.nn.Linear(hidden, hidden, bias=bias)
            self.out_proj = torch.nn.Linear(hidden, hidden, bias=bias)

        def _create_neighborhood_mask(self, seq_len: int, device) -> torch.Tensor:
            # One element write per allowed pair, as upstream: this loop is timed.
            mask = torch.zeros(seq_len, seq_len, device=device, dtype=torch.bool)
            half = kernel_size // 2
            for i in range(seq_len):
                start = max(0, i - half * dilation)
                end = min(seq_len, i + half * dilation + 1)
                for j in range(start, end):
                    if dilation == 1 or (j - i) % dilation == 0:
                        mask[i, j] = True
            return mask

        def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
            b, seq_len, _ = hidden_states.shape

            def heads_first(t: torch.Tensor) -> torch.Tensor:
                return t.view(b, seq_len, heads, self.head_dim).transpose(1, 2)

            query = heads_first(self.q_proj(hidden_states))
            key = heads_first(self.k_proj(hidden_states))
            value = heads_first(self.v_proj(hidden_states))
            scores = torch.matmul(query, key.transpose(-2, -1)) * self.scale
            mask = self._create_neighborhood_mask(seq_len, hidden_states.device)
            scores = scores.masked_fill(~mask, float("-inf"))
            attn_weights = torch.softmax(scores, dim=-1)
            attn_output = torch.matmul(attn_weights, value)
            attn_output = attn_output.transpose(1, 2).contiguous().view(b, seq_len, hidden)
            return self.out_proj(attn_output)

    return TorchNeighborhoodAttention()


def reference_neighborhood_attention(x, params, heads: int, kernel_size: int, dilation: int):
    """float64 neighbourhood attention from its definition: each query's softmax runs over
    its own `kernel_size` neighbours only (gathered, not a masked `[seq, seq]` matrix).

    The key projection's bias adds `q_i . b_k` to every score of query i, which the softmax
    cancels: the output does not depend on it and its gradient is exactly zero. It is left
    out here so that the reference says so; computed through, that zero comes back as
    float64 rounding (~1e-18), and an RMS-scaled tolerance of rounding fails any kernel."""
    import torch
    import torch.nn.functional as F

    b, seq, hidden = x.shape
    d = hidden // heads

    def proj(name: str, t):
        return F.linear(t, params[f"{name}.weight"], params.get(f"{name}.bias"))

    def heads_first(t):
        return t.view(b, seq, heads, d).transpose(1, 2)  # (b, heads, seq, d)

    q, v = heads_first(proj("q_proj", x)), heads_first(proj("v_proj", x))
    k = heads_first(F.linear(x, params["k_proj.weight"]))
    half = kernel_size // 2
    offsets = torch.arange(-half, half + 1, device=x.device) * dilation
    keys = torch.arange(seq, device=x.device)[:, None] + offsets[None, :]  # (seq, kernel)
    inside = (keys >= 0) & (keys < seq)
    keys = keys.clamp(0, seq - 1)
    scores = (q.unsqueeze(3) * k[:, :, keys]).sum(-1) / math.sqrt(d)  # (b, heads, seq, kernel)
    weights = scores.masked_fill(~inside, float("-inf")).softmax(dim=-1)
    out = (weights.unsqueeze(-1) * v[:, :, keys]).sum(3)  # (b, heads, seq, d)
    return proj("out_proj", out.transpose(1, 2).reshape(b, seq, hidden))


@dataclass(frozen=True)
class NeighborhoodAttentionSpec(KernelSpec):
    def validate(self, wl):
        if wl["hidden"] % wl["heads"]:
            raise WorkloadError(
                f"{self.name}: hidden {wl['hidden']} is not a multiple of heads {wl['heads']}"
            )
        if wl["kernel_size"] % 2 == 0:
            raise WorkloadError(f"{self.name}: kernel_size must be odd (liger refuses an even one)")

    def scale_down(self, wl):
        small = dict(wl)
        heads = min(wl["heads"], 2)
        head_dim = min(wl["hidden"] // wl["heads"], 16)
        small.update(batch=min(wl["batch"], 2), seq=min(wl["seq"], 32), heads=heads)
        small["hidden"] = heads * head_dim
        return small

    def make_inputs(self, wl, device, gen):
        shape = (wl["batch"], wl["seq"], wl["hidden"])
        return {"x": randn(shape, torch_dtype(wl["dtype"]), device, gen)}

    def build(self, wl, provider, device, revision):
        import torch

        dims = {"kernel_size": wl["kernel_size"], "dilation": wl["dilation"], "bias": wl["bias"]}
        if provider == "torch":
            module = torch_neighborhood_attention(wl["hidden"], wl["heads"], **dims)
            info = torch_info(
                "TorchNeighborhoodAttention (Liger-Kernel benchmark_fused_neighborhood_attention.py "
                "at 02bac05, re-implemented in kirunner)"
            )
        else:
            mod, info = load_liger(
                "liger_kernel.transformers.fused_neighborhood_attention",
                revision,
                device_type=torch.device(device).type,
            )
            module = mod.LigerFusedNeighborhoodAttention(
                hidden_size=wl["hidden"], num_heads=wl["heads"], dropout=0.0, **dims
            )
        module = module.to(device).to(torch_dtype(wl["dtype"]))
        # The other provider's module, resident as in the script (its four projections have
        # these shapes; the script copies one module's weights into the other): peak memory
        # counts its weights too. Without it the runner read exactly one module's weights below
        # the script on every memory cell at ab7fe2a, both providers (2 MiB at hidden 512 bf16
        # to 16.016 MiB at hidden 1024 fp32).
        other = torch_neighborhood_attention(wl["hidden"], wl["heads"], **dims)
        other = other.to(device).to(torch_dtype(wl["dtype"]))
        return Impl(lambda v: (module(v["x"]),), info, module=module, other_head=other)

    def reference(self, views, params, wl, impl):
        return (
            reference_neighborhood_attention(
                views["x"], params, wl["heads"], wl["kernel_size"], wl["dilation"]
            ),
        )


SPECS = (
    NeighborhoodAttentionSpec(
        name="fused_neighborhood_attention",
        script="benchmark/scripts/benchmark_fused_neighborhood_attention.py",
        providers=("liger", "torch"),
        upstream_rep=100,
        style="fixed_dy",
        params=(
            Param("batch", ("B", "bsz", "batch_size")),
            Param("seq", ("T", "seq_len", "L")),
            Param("hidden", ("H", "hidden_size")),
            Param("heads", ("num_heads",)),
            Param("kernel_size"),
            Param("dilation"),
            Param("bias", kind="bool"),
            Param("dtype", kind="dtype"),
        ),
        inputs=("x",),
        outputs=("y",),
    ),
)

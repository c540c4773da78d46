"""Reference maths for the correctness check, written out in plain eager torch.

Everything here runs in float64 on whatever device the job runs on, on inputs that were
upcast from the very tensors the implementation saw (before it saw them: the
implementation gets clones). Gradients come from autograd over these float64 formulas,
which is exact enough to serve as ground truth for bf16/fp16/fp32 kernels.

The formulas follow the model definitions the kernels implement, not any library's code.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

ROPE_THETA = 10000.0


def rope_inv_freq(head_dim: int, device: torch.device, theta: float = ROPE_THETA) -> torch.Tensor:
    """theta^(-2i/d), rounded to float32 because that is how the models store it."""
    import torch

    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64, device=device) / head_dim
    return (1.0 / (theta**exponents)).to(torch.float32).to(torch.float64)


def rope_half(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Llama rotary embedding, 'rotate half' layout, q/k shaped (batch, heads, seq, head_dim)."""
    import torch

    seq, head_dim = q.shape[-2], q.shape[-1]
    pos = torch.arange(seq, dtype=torch.float64, device=q.device)
    angles = torch.outer(pos, rope_inv_freq(head_dim, q.device))
    angles = torch.cat((angles, angles), dim=-1)  # (seq, head_dim)
    cos, sin = angles.cos(), angles.sin()

    def rotate(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x[..., : head_dim // 2], x[..., head_dim // 2 :]
        rotated = torch.cat((-x2, x1), dim=-1)
        return x * cos + rotated * sin

    return rotate(q), rotate(k)


def rope_interleaved(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Llama 4 rotary embedding: adjacent pairs (x[2i], x[2i+1]) rotated as complex numbers.

    q/k shaped (batch, seq, heads, head_dim).
    """
    import torch

    seq, head_dim = q.shape[1], q.shape[-1]
    pos = torch.arange(seq, dtype=torch.float64, device=q.device)
    angles = torch.outer(pos, rope_inv_freq(head_dim, q.device))  # (seq, head_dim/2)
    cos = angles.cos()[None, :, None, :]
    sin = angles.sin()[None, :, None, :]

    def rotate(x: torch.Tensor) -> torch.Tensor:
        pairs = x.reshape(*x.shape[:-1], head_dim // 2, 2)
        re, im = pairs[..., 0], pairs[..., 1]
        out = torch.stack((re * cos - im * sin, re * sin + im * cos), dim=-1)
        return out.flatten(-2)

    return rotate(q), rotate(k)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    import torch

    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def layer_norm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float
) -> torch.Tensor:
    import torch

    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)  # biased, as LayerNorm defines it
    y = (x - mean) * torch.rsqrt(var + eps) * weight
    return y if bias is None else y + bias


def silu(x: torch.Tensor) -> torch.Tensor:
    return x * x.sigmoid()


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + ((2.0 / math.pi) ** 0.5 * (x + 0.044715 * x.pow(3))).tanh())


ACTIVATIONS = {"silu": silu, "swish": silu, "gelu_pytorch_tanh": gelu_tanh, "gelu_tanh": gelu_tanh}


def gated_mlp(
    x: torch.Tensor, gate_w: torch.Tensor, up_w: torch.Tensor, down_w: torch.Tensor, act: str
) -> torch.Tensor:
    """down(act(gate(x)) * up(x)); weights in nn.Linear's (out, in) layout."""
    try:
        fn = ACTIVATIONS[act]
    except KeyError as exc:
        raise ValueError(f"no reference for activation {act!r}") from exc
    return (fn(x @ gate_w.T) * (x @ up_w.T)) @ down_w.T


def cross_entropy(logits: torch.Tensor, target: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """Mean token cross-entropy over the rows whose target is not ignore_index."""
    import torch

    keep = target != ignore_index
    safe_target = torch.where(keep, target, torch.zeros_like(target))
    nll = torch.logsumexp(logits, dim=-1) - logits.gather(-1, safe_target[:, None]).squeeze(-1)
    nll = torch.where(keep, nll, torch.zeros_like(nll))
    return nll.sum() / keep.sum().clamp_min(1)

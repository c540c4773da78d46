"""fused_linear_cross_entropy: benchmark/scripts/benchmark_fused_linear_cross_entropy.py at
Liger-Kernel 02bac05.

The sweep is over BT (4096 to 32768); the fixed config is H 4096, V 128256, bfloat16 (its
`"mode": "forward"` key is never read; the runner lists it as unused). The script builds
*both* heads whichever provider it times, each one `Linear(H, V, bias=False)` in the dtype
with its default initialisation, so two weights are live in every measurement. Inputs:
`_input = randn(BT, H, requires_grad=True)`, `target = randint(V, (BT, 1)).squeeze(1)`.
- `liger`: the script's `LigerLMHeadCE`: `LigerFusedLinearCrossEntropyLoss(ignore_index=-100,
  reduction="mean")` called on (lin.weight, _input, target);
- `huggingface`: the script's `TorchLMHeadCE`: `lin(x)` (bf16 logits) then
  `nn.CrossEntropyLoss(ignore_index=-100, reduction="mean")`.
Speed (rep 100): forward with no grad_to_none; backward `y.backward(retain_graph=True)` with
grad_to_none [_input]; full a forward and `y.backward()` with no grad_to_none, so the input's
and the weight's gradients accumulate call after call (style `scalar_loss`). Memory: full
only (`scalar_loss_full`).
Adaptation, in the result's notes: the linears are built on the device rather than
initialised on the CPU and moved (same distribution; outside anything measured).

From Liger-Kernel 0.6.2 on (commit 2845fe83; the ab7fe2a rows carry 0.7.0) the script builds
only the provider's head, and adds a third provider, `liger-fp32-accum` (normalised
`liger_fp32_accum`): `LigerFusedLinearCrossEntropyLoss(..., accum_dtype=torch.float32)`; and
(0.6.3 on) a fourth pass, `no-grad-forward`, the forward timed under `torch.no_grad()` (the
runner's pass of that name). A job whose liger revision is 0.6.2 or later gets one head.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..building import Impl, KernelSpec, randn, torch_dtype, torch_info
from ..impls import load_liger
from ..workload import Param, WorkloadError

IGNORE_INDEX = -100  # both heads' default, which the script keeps
_NOTES = ["linears built on the device, not initialised on the CPU and moved"]
ONE_HEAD_FROM = (0, 6, 2)  # the script builds only the provider's head from this release on


def one_head(revision: str | None) -> bool:
    """Whether the script at this liger release builds the provider's head alone."""
    try:
        parts = tuple(int(p) for p in str(revision).split(".")[:3])
    except ValueError:
        return False
    return parts >= ONE_HEAD_FROM


def _linear(wl, device):
    import torch

    dtype = torch_dtype(wl["dtype"])
    return torch.nn.Linear(wl["hidden"], wl["V"], bias=False, dtype=dtype, device=device)


@dataclass(frozen=True)
class FusedLinearCrossEntropySpec(KernelSpec):
    def make_inputs(self, wl, device, gen):
        import torch

        x = randn((wl["bt"], wl["hidden"]), torch_dtype(wl["dtype"]), device, gen)
        target = torch.randint(0, wl["V"], (wl["bt"], 1), device=device, generator=gen).squeeze(1)
        return {"x": x, "target": target}

    def build(self, wl, provider, device, revision):
        import torch

        lin = _linear(wl, device)
        # Before 0.6.2 the script built the other provider's head too, live in every call.
        other = None if one_head(revision) else _linear(wl, device)
        if provider == "liger_fp32_accum" and other is not None:
            raise WorkloadError(
                f"liger-fp32-accum is a provider from Liger-Kernel 0.6.2 on, not {revision}"
            )
        if provider == "huggingface":
            ce = torch.nn.CrossEntropyLoss(ignore_index=IGNORE_INDEX, reduction="mean")
            info = torch_info(
                "TorchLMHeadCE as defined in Liger-Kernel "
                "benchmark_fused_linear_cross_entropy.py at 02bac05",
                list(_NOTES),
            )

            def fwd(v):
                return (ce(lin(v["x"]), v["target"]),)
        else:
            mod, info = load_liger(
                "liger_kernel.transformers.fused_linear_cross_entropy",
                revision,
                device_type=torch.device(device).type,
            )
            info.notes.extend(_NOTES)
            accum = {"accum_dtype": torch.float32} if provider == "liger_fp32_accum" else {}
            flce = mod.LigerFusedLinearCrossEntropyLoss(
                ignore_index=IGNORE_INDEX, reduction="mean", **accum
            )
            if accum:
                info.notes.append("accum_dtype=torch.float32 (the script's liger-fp32-accum)")

            def fwd(v):
                return (flce(lin.weight, v["x"], v["target"]),)

        return Impl(fwd, info, module=torch.nn.ModuleDict({"lin": lin}), other_head=other)

    def reference(self, views, params, wl, impl):
        import torch

        logits = views["x"] @ params["lin.weight"].t()
        return (
            torch.nn.functional.cross_entropy(logits, views["target"], ignore_index=IGNORE_INDEX),
        )


SPECS = (
    FusedLinearCrossEntropySpec(
        name="fused_linear_cross_entropy",
        script="benchmark/scripts/benchmark_fused_linear_cross_entropy.py",
        providers=("liger", "huggingface", "liger_fp32_accum"),
        upstream_rep=100,
        style="scalar_loss",
        memory_style="scalar_loss_full",
        params=(
            Param("bt", ("BT",), help="rows of the (BT, H) input (the swept x)"),
            Param("hidden", ("H", "hidden_size")),
            Param("V", ("vocab", "vocab_size")),
            Param("dtype", kind="dtype"),
        ),
        inputs=("x",),
        outputs=("loss",),
        small_caps={"bt": 16, "hidden": 64, "V": 512},
    ),
)

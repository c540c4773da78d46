"""Correctness check: the implementation against float64 reference maths.

Fresh random inputs (seeded, seed recorded). The implementation is called on *clones*
of them, made right before the call: Liger's RoPE rotates q/k in place when handed the
transposed views the benchmark uses, its cross-entropy writes the gradient into the
logits, and LigerRMSNorm(in_place=True) writes dX into dY. The reference is computed
afterwards from the untouched originals, upcast to float64.

Pass criterion per checked tensor, elementwise:

    |impl - ref| <= atol * scale + rtol * |ref|,   scale = RMS(ref) (1 if ref is all 0)

Scaling atol by the tensor's RMS makes one tolerance serve outputs of very different
magnitude (a cross-entropy gradient is ~1/rows, an MLP weight gradient ~rows); without
it, bf16 rounding of a matmul output that happens to be near zero would fail a purely
relative test. The table below is the whole policy; docs/runner.md explains the values.
Any NaN or Inf in the implementation's tensor fails the check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from .kernels import Impl, KernelSpec

__all__ = ["TOLERANCES", "CheckResult", "run_check"]

# dtype label -> (atol in units of RMS(ref), rtol)
TOLERANCES: dict[str, tuple[float, float]] = {
    "fp32": (1e-4, 1e-4),
    "fp16": (2e-2, 1e-2),
    "bf16": (1e-1, 5e-2),
}

_CHUNK = 1 << 25  # elements per comparison chunk (256 MiB in float64)

REFERENCE = "float64 eager torch (kirunner.reference), autograd for gradients"


@dataclass
class CheckResult:
    passed: bool
    checks: list[dict[str, Any]]
    seed: int

    def as_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "reference": REFERENCE,
            "criterion": "|impl-ref| <= atol*RMS(ref) + rtol*|ref| elementwise; no NaN/Inf",
            "seed": self.seed,
            "checks": self.checks,
        }


def _compare(
    name: str, got: torch.Tensor | None, want: torch.Tensor, tol: tuple[float, float]
) -> dict[str, Any]:
    import torch

    atol, rtol = tol
    entry: dict[str, Any] = {"name": name, "atol": atol, "rtol": rtol, "shape": list(want.shape)}
    if got is None:
        entry.update(passed=False, problem="implementation produced no gradient")
        return entry
    if tuple(got.shape) != tuple(want.shape):
        entry.update(
            passed=False, problem=f"shape {list(got.shape)} != reference {list(want.shape)}"
        )
        return entry
    # Chunked: at upstream's largest shapes (cross-entropy logits of 16384 x 131072) a
    # whole-tensor float64 diff/bound/ratio would need tens of GiB on top of the reference.
    g = got.detach().reshape(-1)
    w = want.detach().reshape(-1)
    chunk = _CHUNK
    sumsq, finite = 0.0, True
    for i in range(0, w.numel(), chunk):
        sumsq += float(w[i : i + chunk].to(torch.float64).pow(2).sum())
        finite = finite and bool(torch.isfinite(g[i : i + chunk]).all())
    scale = (sumsq / w.numel()) ** 0.5 if w.numel() else 0.0
    scale = scale if scale > 0 else 1.0
    max_abs = worst = ref_max = 0.0
    if finite:
        for i in range(0, w.numel(), chunk):
            gc = g[i : i + chunk].to(torch.float64)
            wc = w[i : i + chunk].to(torch.float64)
            diff = (gc - wc).abs()
            max_abs = max(max_abs, float(diff.max()))
            worst = max(worst, float((diff / (atol * scale + rtol * wc.abs())).max()))
            ref_max = max(ref_max, float(wc.abs().max()))
    entry.update(
        passed=bool(finite and worst <= 1.0),
        maxAbsErr=max_abs if finite else None,
        maxRelErr=(max_abs / ref_max) if finite and ref_max > 0 else None,
        scale=scale,
        worstRatio=worst if finite else None,  # max |err| / bound; <= 1 passes
    )
    if not finite:
        entry["problem"] = "NaN or Inf in implementation output"
    return entry


def run_check(
    spec: KernelSpec, impl: Impl, wl: dict[str, Any], device: Any, mode: str, seed: int
) -> CheckResult:
    import torch

    tol = TOLERANCES[wl["dtype"]]
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    raw = spec.make_inputs(wl, device, gen)
    want_grads = mode in ("backward", "full")
    params = dict(impl.module.named_parameters()) if impl.module is not None else {}
    got = _implementation_side(spec, impl, raw, params, want_grads, gen)
    ref_wrt, ref_outs = _reference_side(spec, impl, raw, params, wl, want_grads)

    checks = [
        _compare(name, got_out, want, tol)
        for name, got_out, want in zip(spec.outputs, got.outs, ref_outs, strict=True)
    ]
    if want_grads:
        ref_grads = torch.autograd.grad(
            ref_outs,
            ref_wrt,
            grad_outputs=[None if d is None else d.to(torch.float64) for d in got.dys],
            allow_unused=True,
        )
        for i, (name, got_grad, want) in enumerate(
            zip(got.wrt_names, got.grads, ref_grads, strict=True)
        ):
            if want is None:
                want = torch.zeros_like(ref_wrt[i])
            checks.append(_compare(name, got_grad, want, tol))
    return CheckResult(passed=all(c["passed"] for c in checks), checks=checks, seed=seed)


@dataclass
class _Got:
    """What the implementation gave, detached: outputs, the output gradients it was handed,
    and the gradients it returned (named grad_<input> / grad_<parameter>)."""

    outs: list
    dys: list
    grads: list
    wrt_names: list[str]


def _implementation_side(
    spec: KernelSpec, impl: Impl, raw: dict, params: dict, want_grads: bool, gen: Any
) -> _Got:
    """Run the implementation on clones of the inputs (the reference needs them untouched);
    its graph and inputs are freed on return, before the float64 reference allocates."""
    import torch

    leaves = {n: t.clone() for n, t in raw.items()}
    for n in spec.inputs:
        leaves[n].requires_grad_(True)
    views = spec.views(leaves)
    outs = impl.forward(views)
    got = _Got([o.detach().clone() for o in outs], [], [], [])
    if not want_grads:
        return got
    # Same dtype as the output: the reference then sees exactly the values the
    # implementation was given, with no rounding in between.
    got.dys = [None if o.dim() == 0 else torch.empty_like(o).normal_(generator=gen) for o in outs]
    wrt = [views[n] for n in spec.inputs] + list(params.values())
    got.wrt_names = [f"grad_{n}" for n in spec.inputs] + [f"grad_{p}" for p in params]
    for p in params.values():
        p.grad = None
    got.grads = list(
        torch.autograd.grad(
            outs,
            wrt,
            grad_outputs=[None if d is None else d.clone() for d in got.dys],
            allow_unused=True,
        )
    )
    return got


def _reference_side(
    spec: KernelSpec, impl: Impl, raw: dict, params: dict, wl: dict[str, Any], want_grads: bool
) -> tuple[list, Any]:
    """The reference in float64 from the untouched originals: (the tensors its gradients are
    taken with respect to, in the implementation's order, and its outputs)."""
    import torch

    ref_leaves = {
        n: (t.detach().to(torch.float64) if t.is_floating_point() else t) for n, t in raw.items()
    }
    for n in spec.inputs:
        ref_leaves[n].requires_grad_(want_grads)
    ref_views = spec.views(ref_leaves)
    ref_params = {
        n: p.detach().to(torch.float64).requires_grad_(want_grads) for n, p in params.items()
    }
    ref_outs = spec.reference(ref_views, ref_params, wl, impl)
    ref_wrt = [ref_views[n] for n in spec.inputs] + list(ref_params.values())
    return ref_wrt, ref_outs

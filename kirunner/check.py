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
relative test. The table below is the whole default policy; docs/runner.md explains the
values. Any NaN or Inf in the implementation's tensor fails the check.

A family may name a different rule for one of its outputs (its spec's `check_rules(wl)`, a
dict output name -> rule; every rule keeps the bound above and changes one thing, each for a
kind of output that the plain RMS-scaled bound misjudges):

- `SupportScaled` (sparse outputs, e.g. sparsemax): the scale is the RMS of ref over its
  nonzero elements, not over all of them. Most of a sparse output is exact zeros, which dilute
  the RMS; an output that is 99.9% zeros would otherwise get a bound a thirtieth of its typical
  value. At ref's exact zeros the rtol term vanishes, so the bound there is the absolute
  atol * scale; the largest |impl| at those zeros is recorded (`maxAtZeros`).
- `SignAtTies` (outputs that are a constant times sign(a - b), e.g. tvd's gradient): an element
  may miss the bound only where the reference's own argument a - b (float64, from the
  reference's inputs) is within rounding of the tie, |a - b| <= ulps * eps(dtype) * max(|a|,
  |b|); there the implementation's rounded a and b may order the other way. The elements that
  miss the bound must all be at such ties, each no larger than the sign function's
  magnitude max|ref| (`mismatchesAwayFromTies` counts those that are not), and be at most
  `maxFraction` of the tensor.
- `AtSupportEdge` (gradients through a support chosen by a threshold, e.g. sparsemax's): an
  element may miss the bound only in a slice (a row, along the kernel's dimension) where an
  element of the reference's input lies within rounding of the reference's threshold,
  |z - tau| <= ulps * eps(dtype) * (max|z| + 1) over the slice; there the implementation's
  rounded threshold may take that element into the support or leave it out, which changes the
  gradient of the whole slice (its mean over the support). Every element that misses must be
  in such a slice (`mismatchesAwayFromTies` counts those that are not), and the misses at
  most `maxFraction` of the tensor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from .building import Impl, KernelSpec

__all__ = [
    "TOLERANCES",
    "AtSupportEdge",
    "CheckResult",
    "SignAtTies",
    "SupportScaled",
    "run_check",
]

# dtype label -> (atol in units of RMS(ref), rtol)
TOLERANCES: dict[str, tuple[float, float]] = {
    "fp32": (1e-4, 1e-4),
    "fp16": (2e-2, 1e-2),
    "bf16": (1e-1, 5e-2),
}

_CHUNK = 1 << 25  # elements per comparison chunk (256 MiB in float64)

# `errorByRef`: the largest error per band of |ref|, BANDS_PER_DECADE bands a decade from
# 10**BAND_LOW up (smaller |ref| in the lowest band, down to 0; exact zeros in their own band).
# It lets a reader judge the output against any elementwise bound atol + rtol*|ref| (upstream's
# own test tolerance, runs/evidence_correctness.py) without the tensors.
BANDS_PER_DECADE = 4
BAND_LOW, BAND_HIGH = -12, 8

REFERENCE = "float64 eager torch (kirunner.reference), autograd for gradients"

# Machine epsilon per dtype label: the unit that SignAtTies' tie width counts in.
EPS: dict[str, float] = {"fp32": 2.0**-23, "fp16": 2.0**-10, "bf16": 2.0**-7}


@dataclass(frozen=True)
class SupportScaled:
    """The RMS-scaled bound with the scale taken over ref's nonzero elements (module doc)."""

    def describe(self, dtype: str) -> dict[str, Any]:
        return {"rule": "support_scaled", "scale": "RMS(ref) over ref != 0"}


@dataclass(frozen=True)
class SignAtTies:
    """For an output c * sign(a - b): misses of the bound allowed only at ties (module doc).

    `operands(ref_views)` gives a and b, the reference's float64 operands, shaped like the
    output."""

    operands: Callable[[dict], tuple[Any, Any]]
    ulps: float = 64.0
    max_fraction: float = 1e-4

    def describe(self, dtype: str) -> dict[str, Any]:
        return {
            "rule": "sign_at_ties",
            "tie": "|a-b| <= ulps*eps*max(|a|,|b|), a-b the reference's float64 argument",
            "ulps": self.ulps,
            "eps": EPS[dtype],
            "maxFraction": self.max_fraction,
        }


@dataclass(frozen=True)
class AtSupportEdge:
    """For a gradient through a thresholded support: misses of the bound allowed only in the
    slices whose support decision is within rounding (module doc).

    `edges(ref_views, width)` gives a boolean tensor shaped like the output, True across every
    slice with an element z of the reference's input at |z - tau| <= width * (max|z| + 1)."""

    edges: Callable[[dict, float], Any]
    ulps: float = 64.0
    max_fraction: float = 1e-4

    def describe(self, dtype: str) -> dict[str, Any]:
        return {
            "rule": "at_support_edge",
            "tie": "a slice with |z-tau| <= ulps*eps*(max|z|+1), z and tau the reference's",
            "ulps": self.ulps,
            "eps": EPS[dtype],
            "maxFraction": self.max_fraction,
        }


CRITERION = "|impl-ref| <= atol*RMS(ref) + rtol*|ref| elementwise; no NaN/Inf"
# Appended to CRITERION only when a family names a rule, so results that use none keep the
# text every earlier result carries.
RULES_NOTE = "; an output with a `rule` is judged by it (docs/runner.md, Correctness check)"


# The rules that allow misses where a mask says (_tie_chunks).
_TIE_RULES = (SignAtTies, AtSupportEdge)


@dataclass
class CheckResult:
    passed: bool
    checks: list[dict[str, Any]]
    seed: int
    ruled: bool = False  # a family named a rule for one of its outputs

    def as_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "reference": REFERENCE,
            "criterion": CRITERION + (RULES_NOTE if self.ruled else ""),
            "seed": self.seed,
            "checks": self.checks,
        }


def _compare(
    name: str,
    got: torch.Tensor | None,
    want: torch.Tensor,
    tol: tuple[float, float],
    rule: SupportScaled | SignAtTies | AtSupportEdge | None = None,
    ctx: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One checked tensor; `ctx` carries the dtype label and, for the rules that allow misses
    at ties (SignAtTies, AtSupportEdge), the reference's views."""
    import torch

    atol, rtol = tol
    entry: dict[str, Any] = {"name": name, "atol": atol, "rtol": rtol, "shape": list(want.shape)}
    if rule is not None:
        entry["criterion"] = rule.describe(ctx["dtype"])
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
    sumsq, count, finite = 0.0, 0, True
    for i in range(0, w.numel(), _CHUNK):
        wc = w[i : i + _CHUNK].to(torch.float64)
        if isinstance(rule, SupportScaled):
            wc = wc[wc != 0]
        sumsq += float(wc.pow(2).sum())
        count += wc.numel()
        finite = finite and bool(torch.isfinite(g[i : i + _CHUNK]).all())
    scale = (sumsq / count) ** 0.5 if count else 0.0
    scale = scale if scale > 0 else 1.0
    if not finite:
        entry.update(passed=False, maxAbsErr=None, maxRelErr=None, scale=scale, worstRatio=None)
        entry["problem"] = "NaN or Inf in implementation output"
        return entry
    stats = _Stats()
    ties = _tie_chunks(rule, ctx, w.numel()) if isinstance(rule, _TIE_RULES) else None
    for i in range(0, w.numel(), _CHUNK):
        gc = g[i : i + _CHUNK].to(torch.float64)
        wc = w[i : i + _CHUNK].to(torch.float64)
        tie = None if ties is None else ties(i)
        stats.add(gc, wc, atol * scale + rtol * wc.abs(), tie, isinstance(rule, SignAtTies))
    entry.update(
        passed=stats.passed(rule, w.numel()),
        errorByRef=stats.bands(),
        maxAbsErr=stats.max_abs,
        maxRelErr=(stats.max_abs / stats.ref_max) if stats.ref_max > 0 else None,
        scale=scale,
        worstRatio=stats.worst,  # max |err| / bound; <= 1 passes
    )
    entry.update(stats.extra(rule, w.numel()))
    return entry


@dataclass
class _Stats:
    """Running figures over the chunks of one checked tensor."""

    max_abs: float = 0.0
    worst: float = 0.0  # over every element
    ref_max: float = 0.0
    at_zeros: float = 0.0  # max |impl| where ref == 0
    misses: int = 0  # elements over the bound
    misses_off_tie: int = 0  # ... where the reference's argument is not at a tie
    at_tie: int = 0  # elements where a miss is allowed
    worst_off_tie: float = 0.0
    band_err: Any = None  # largest error per band of |ref| (errorByRef); index 0: ref == 0

    def add(self, gc: Any, wc: Any, bound: Any, tie: Any, sign_rule: bool = False) -> None:
        diff = (gc - wc).abs()
        self._add_bands(diff, wc.abs())
        ratio = diff / bound
        self.max_abs = max(self.max_abs, float(diff.max()))
        self.worst = max(self.worst, float(ratio.max()))
        self.ref_max = max(self.ref_max, float(wc.abs().max()))
        zeros = wc == 0
        if bool(zeros.any()):
            self.at_zeros = max(self.at_zeros, float(gc[zeros].abs().max()))
        over = ratio > 1
        self.misses += int(over.sum())
        if tie is not None:
            off_tie = over & ~tie
            if sign_rule:
                # At a tie the element may take any value of c * sign (-c, 0 or c), nothing
                # larger.
                off_tie |= over & (gc.abs() > float(wc.abs().max()) + bound)
            self.misses_off_tie += int(off_tie.sum())
            self.at_tie += int(tie.sum())
            off = ratio[~tie]
            if off.numel():
                self.worst_off_tie = max(self.worst_off_tie, float(off.max()))

    def _add_bands(self, diff: Any, ref: Any) -> None:
        import torch

        n = (BAND_HIGH - BAND_LOW) * BANDS_PER_DECADE
        band = torch.floor((torch.log10(ref) - BAND_LOW) * BANDS_PER_DECADE).clamp(0, n - 1)
        band = torch.where(ref == 0, torch.zeros_like(band), band + 1).long()
        if self.band_err is None:
            self.band_err = torch.full((n + 1,), -1.0, dtype=torch.float64, device=diff.device)
        self.band_err.scatter_reduce_(0, band, diff, reduce="amax")

    def bands(self) -> list[list[float]]:
        """[low, high, largest error] of each band of |ref| that holds an element."""
        if self.band_err is None:
            return []
        out = []
        for i, err in enumerate(self.band_err.tolist()):
            if err < 0:
                continue
            if i == 0:
                low = high = 0.0
            else:
                low = 0.0 if i == 1 else 10.0 ** (BAND_LOW + (i - 1) / BANDS_PER_DECADE)
                high = 10.0 ** (BAND_LOW + i / BANDS_PER_DECADE)
                if i == (BAND_HIGH - BAND_LOW) * BANDS_PER_DECADE:
                    high = max(high, self.ref_max)
            out.append([low, min(high, self.ref_max) if i else 0.0, err])
        return out

    def passed(self, rule: Any, n: int) -> bool:
        if isinstance(rule, _TIE_RULES):
            return self.misses_off_tie == 0 and self.misses <= rule.max_fraction * n
        return self.worst <= 1.0

    def extra(self, rule: Any, n: int) -> dict[str, Any]:
        if isinstance(rule, SupportScaled):
            return {"maxAtZeros": self.at_zeros}
        if isinstance(rule, _TIE_RULES):
            extra = {
                "mismatches": self.misses,
                "mismatchFraction": self.misses / n if n else 0.0,
                "mismatchesAwayFromTies": self.misses_off_tie,
                "worstRatioAwayFromTies": self.worst_off_tie,
            }
            if isinstance(rule, AtSupportEdge):
                extra["edgeFraction"] = self.at_tie / n if n else 0.0
            return extra
        return {}


def _tie_chunks(
    rule: SignAtTies | AtSupportEdge, ctx: dict[str, Any], n: int
) -> Callable[[int], Any]:
    """For chunk offset i, a boolean mask of the elements where a miss is allowed: the
    reference's argument a - b within rounding of zero (SignAtTies), or the element's slice at
    its support's edge (AtSupportEdge)."""
    import torch

    if isinstance(rule, AtSupportEdge):
        edge = rule.edges(ctx["ref_views"], rule.ulps * EPS[ctx["dtype"]]).reshape(-1)
        return lambda i: edge[i : i + _CHUNK]
    a, b = (t.detach().reshape(-1) for t in rule.operands(ctx["ref_views"]))
    width = rule.ulps * EPS[ctx["dtype"]]

    def tie(i: int) -> Any:
        ac = a[i : i + _CHUNK].to(torch.float64)
        bc = b[i : i + _CHUNK].to(torch.float64)
        return (ac - bc).abs() <= width * torch.maximum(ac.abs(), bc.abs())

    return tie


def run_check(
    spec: KernelSpec, impl: Impl, wl: dict[str, Any], device: Any, mode: str, seed: int
) -> CheckResult:
    import torch

    tol = TOLERANCES[wl["dtype"]]
    rules = spec.check_rules(wl) if hasattr(spec, "check_rules") else {}
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    raw = spec.make_inputs(wl, device, gen)
    want_grads = mode in ("backward", "full")
    params = dict(impl.module.named_parameters()) if impl.module is not None else {}
    got = _implementation_side(spec, impl, raw, params, want_grads, gen)
    ref_wrt, ref_outs, ref_views = _reference_side(spec, impl, raw, params, wl, want_grads)
    # Only a rule reads the reference's views after the reference has run; without one they
    # are dropped here, so the comparisons hold no more memory than before rules existed.
    ctx = {"dtype": wl["dtype"], "ref_views": ref_views if rules else None}
    del ref_views

    checks = [
        _compare(name, got_out, want, tol, rules.get(name), ctx)
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
            checks.append(_compare(name, got_grad, want, tol, rules.get(name), ctx))
    passed = all(c["passed"] for c in checks)
    return CheckResult(passed=passed, checks=checks, seed=seed, ruled=bool(rules))


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
    # A tiled MLP (tiled_geglu, tiled_swiglu: DeepSpeed's TiledMLP and Liger's) recomputes
    # each shard in its backward and backpropagates it there, so its weights' gradients land
    # in .grad (reset to None above) rather than in what autograd.grad returns.
    first = len(spec.inputs)
    for i, p in enumerate(params.values()):
        if got.grads[first + i] is None and p.grad is not None:
            got.grads[first + i] = p.grad.detach().clone()
            p.grad = None
    return got


def _reference_side(
    spec: KernelSpec, impl: Impl, raw: dict, params: dict, wl: dict[str, Any], want_grads: bool
) -> tuple[list, Any, dict]:
    """The reference in float64 from the untouched originals: (the tensors its gradients are
    taken with respect to, in the implementation's order, its outputs, and its views)."""
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
    return ref_wrt, ref_outs, ref_views

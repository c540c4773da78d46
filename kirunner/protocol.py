"""The timed and memory-measured closures, built the way each upstream script builds them.

Liger-Kernel's benchmark scripts do not share one recipe; four styles cover the seven
kernels, and the differences matter for what is timed (and allocated):

``autograd_grad`` (rope, llama4_rope)
    dq/dk drawn once at setup. backward = ``torch.autograd.grad((q_out, k_out), (q, k),
    (dq, dk), allow_unused=True, retain_graph=True)`` on one forward's graph; full =
    forward + the same call without retain_graph. grad_to_none=[q, k]. The memory
    measurement runs full *with* retain_graph=True (as bench_memory_* does).
``fixed_dy`` (rms_norm, layer_norm)
    dy drawn once at setup; backward = ``y.backward(dy, retain_graph=True)``; full =
    forward + that. grad_to_none=[x].
``random_dy`` (swiglu, geglu)
    backward draws ``do = randn_like(y)`` once; full draws ``randn_like(y)`` inside the
    timed call (so the draw is timed, as upstream). grad_to_none=[x].
``scalar_loss`` (cross_entropy)
    forward and full pass no grad_to_none (x.grad accumulates, as upstream);
    backward = ``y.backward(retain_graph=True)`` with grad_to_none=[x]; full =
    forward + ``y.backward()``.
``scalar_loss_retain`` (jsd, kl_div, tvd)
    as scalar_loss, but full = forward + ``y.backward(retain_graph=True)``.
``lm_head_loss`` (fused_linear_jsd)
    as scalar_loss, but backward's grad_to_none also lists the weights named in the
    implementation's ``grad_to_none_extra`` (the script resets the torch module's weights).
``frozen_input_loss`` (dpo_loss, kto_loss)
    as scalar_loss, but the benchmarked input does not require grad (the scripts draw it
    without requires_grad): only the weights get gradients. backward's grad_to_none is still
    [_input], which resets nothing, as upstream.
``fresh_dy_ids`` (embedding)
    the input is integer ids, so only the module's weight gets a gradient; backward =
    ``y.backward(randn_like(y), retain_graph=True)`` on one forward, the draw inside the timed
    call, grad_to_none=[ids] (resets nothing, as upstream); full = forward +
    ``y.backward(randn_like(y))``, freeing the graph, no grad_to_none; forward none either.
``fixed_dys_release`` (fused_add_rms_norm)
    two inputs and two outputs, dys drawn once; backward = ``torch.autograd.backward(outs,
    dys, retain_graph=True)`` on one forward; full = forward + the same call freeing the
    graph (speed and memory alike); grad_to_none = the inputs in every pass.
``mhc_loss`` (mhc_coeffs, mhc_pre, mhc_post_res)
    the loss is the sum of the outputs' mean squares. forward runs on tensors that do not
    require grad (the script draws them so for forward), with no grad_to_none; backward =
    ``loss.backward(retain_graph=True)`` on one forward; full = forward + ``loss.backward()``
    (for memory with the outputs held until backward returns, as bench_memory_mhc's locals);
    grad_to_none = the inputs and the implementation module's parameters.
``*_full`` memory styles (group_norm, jsd, kl_div, tvd, sparsemax)
    these scripts' bench_memory_* ignore the pass and always measure full (forward and
    backward with retain_graph=True): ``fixed_dy_full``, ``scalar_loss_retain_full``; and
    ``scalar_loss_full``, ``lm_head_loss_full`` (distill_*, fused_linear_jsd: backward frees
    the graph).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from .building import Impl, KernelSpec

__all__ = ["memory_closure", "speed_closure"]

Closure = Callable[[], Any]


class _Case:
    """Tensors and forward for one measurement, allocated as the upstream setup does."""

    def __init__(
        self,
        spec: KernelSpec,
        impl: Impl,
        wl: dict[str, Any],
        device: Any,
        gen: Any,
        for_memory: bool = False,
    ) -> None:
        raw = spec.memory_inputs(wl, device, gen) if for_memory else None
        raw = raw if raw is not None else spec.make_inputs(wl, device, gen)
        for name in spec.inputs:
            raw[name].requires_grad_(True)
        self.spec = spec
        self.impl = impl
        self.gen = gen
        self.leaves = raw
        self.views = spec.views(raw)
        self.wrt = [self.views[n] for n in spec.inputs]

    def forward(self) -> tuple[torch.Tensor, ...]:
        return self.impl.forward(self.views)


def _normal_like(t: torch.Tensor, gen: Any) -> torch.Tensor:
    """randn_like(t) from our generator; empty_like keeps t's strides as randn_like does
    (upstream's dq for a transposed q is itself transposed)."""
    import torch

    return torch.empty_like(t, requires_grad=False).normal_(generator=gen)


def _autograd_grad(case: _Case, mode: str, *, for_memory: bool) -> tuple[Closure, list | None]:
    import torch

    dys = [_normal_like(w, case.gen) for w in case.wrt]
    g2n = list(case.wrt)
    if mode == "forward":
        return case.forward, g2n
    if mode == "backward":
        outs = case.forward()
        return (
            lambda: torch.autograd.grad(outs, case.wrt, dys, allow_unused=True, retain_graph=True),
            g2n,
        )

    retain = for_memory  # bench_memory_* passes retain_graph=True, bench_speed_* does not

    def full() -> None:
        outs = case.forward()
        torch.autograd.grad(outs, case.wrt, dys, allow_unused=True, retain_graph=retain)

    return full, g2n


def _fixed_dy(case: _Case, mode: str, *, for_memory: bool) -> tuple[Closure, list | None]:
    (x,) = case.wrt
    dy = _normal_like(x, case.gen)
    g2n = [x]
    if mode == "forward":
        return case.forward, g2n
    if mode == "backward":
        (y,) = case.forward()
        return lambda: y.backward(dy, retain_graph=True), g2n

    def full() -> None:
        (y,) = case.forward()
        y.backward(dy, retain_graph=True)

    return full, g2n


def _random_dy(case: _Case, mode: str, *, for_memory: bool) -> tuple[Closure, list | None]:
    import torch

    (x,) = case.wrt
    g2n = [x]
    if mode == "forward":
        return case.forward, g2n
    if mode == "backward":
        # randn_like(y), as utils.run_speed_benchmark draws it: y's dtype can differ from x's
        # (DyT's float32 parameters make a bf16 x's output float32), and a dy of x's dtype
        # costs autograd a cast on every call.
        (y,) = case.forward()
        do = _normal_like(y, case.gen)
        return lambda: y.backward(do, retain_graph=True), g2n

    def full() -> None:
        (y,) = case.forward()
        y.backward(torch.randn_like(y), retain_graph=True)

    return full, g2n


def _scalar_loss(case: _Case, mode: str, *, for_memory: bool) -> tuple[Closure, list | None]:
    (x,) = case.wrt
    return _loss_closures(case, mode, x)


def _loss_closures(case: _Case, mode: str, x: Any) -> tuple[Closure, list | None]:
    """A scalar loss: forward alone, backward of one forward kept, or both; grad_to_none=[x]."""
    if mode == "forward":
        return case.forward, None
    if mode == "backward":
        (y,) = case.forward()
        return lambda: y.backward(retain_graph=True), [x]

    def full() -> None:
        (y,) = case.forward()
        y.backward()

    return full, None


def _fixed_dy_release(case: _Case, mode: str, *, for_memory: bool) -> tuple[Closure, list | None]:
    """benchmark_dyt.py: as fixed_dy, but its speed `full` frees the graph (backward without
    retain_graph); its memory `full` keeps it."""
    if mode != "full" or for_memory:
        return _fixed_dy(case, mode, for_memory=for_memory)
    (x,) = case.wrt
    dy = _normal_like(x, case.gen)

    def full() -> None:
        (y,) = case.forward()
        y.backward(dy)

    return full, [x]


def _ones_dy(case: _Case, mode: str, *, for_memory: bool) -> tuple[Closure, list | None]:
    """benchmark_softmax.py's bench_memory: the gradient is ones, not a random draw."""
    import torch

    (x,) = case.wrt
    if mode == "forward":
        return case.forward, [x]
    if mode == "backward":
        do = torch.ones_like(x)
        (y,) = case.forward()
        return lambda: y.backward(do, retain_graph=True), [x]

    def full() -> None:
        (y,) = case.forward()
        y.backward(torch.ones_like(y), retain_graph=True)

    return full, [x]


def _scalar_loss_retain(case: _Case, mode: str, *, for_memory: bool) -> tuple[Closure, list | None]:
    """benchmark_jsd/kl_div/tvd.py: scalar_loss whose full keeps the graph."""
    if mode != "full":
        return _scalar_loss(case, mode, for_memory=for_memory)

    def full() -> None:
        (y,) = case.forward()
        y.backward(retain_graph=True)

    return full, None


def _lm_head_loss(case: _Case, mode: str, *, for_memory: bool) -> tuple[Closure, list | None]:
    """benchmark_fused_linear_jsd.py: scalar_loss whose backward also resets weights."""
    fn, g2n = _scalar_loss(case, mode, for_memory=for_memory)
    if mode == "backward":
        g2n = [*g2n, *getattr(case.impl, "grad_to_none_extra", ())]
    return fn, g2n


def _frozen_input_loss(case: _Case, mode: str, *, for_memory: bool) -> tuple[Closure, list | None]:
    """benchmark_dpo_loss.py, benchmark_kto_loss.py: scalar_loss on an input without grad
    (upstream still lists it in grad_to_none, where resetting it does nothing)."""
    return _loss_closures(case, mode, case.views["x"])


def _fresh_dy_ids(case: _Case, mode: str, *, for_memory: bool) -> tuple[Closure, list | None]:
    import torch

    ids = list(case.leaves.values())
    if mode == "forward":
        return case.forward, None
    if mode == "backward":
        (y,) = case.forward()
        return lambda: y.backward(torch.randn_like(y), retain_graph=True), ids

    def full() -> None:
        (y,) = case.forward()
        y.backward(torch.randn_like(y))

    return full, None


def _fixed_dys_release(case: _Case, mode: str, *, for_memory: bool) -> tuple[Closure, list | None]:
    import torch

    dys = [_normal_like(w, case.gen) for w in case.wrt]
    g2n = list(case.wrt)
    if mode == "forward":
        return case.forward, g2n
    if mode == "backward":
        outs = case.forward()
        return lambda: torch.autograd.backward(outs, dys, retain_graph=True), g2n

    def full() -> None:
        torch.autograd.backward(case.forward(), dys)

    return full, g2n


def _mhc_loss(case: _Case, mode: str, *, for_memory: bool) -> tuple[Closure, list | None]:
    params = list(case.impl.module.parameters()) if case.impl.module is not None else []
    if mode == "forward":
        for t in [*case.leaves.values(), *params]:
            t.requires_grad_(False)
        return case.forward, None

    def loss():
        return sum(o.square().mean() for o in case.forward())

    g2n = [*case.wrt, *params]
    if mode == "backward":
        y = loss()
        return lambda: y.backward(retain_graph=True), g2n
    if for_memory:
        # bench_memory_mhc holds the outputs in locals (`out`; `hp, hpo, hr`) until backward
        # returns, so they stay in its peak after autograd let go of them: one float32
        # [B, T, C] for mhc_pre's torch line, the bf16 output for liger's.
        def full() -> None:
            outs = case.forward()
            sum(o.square().mean() for o in outs).backward()

        return full, g2n
    return (lambda: loss().backward()), g2n


def _always_full(style: Callable[..., tuple[Closure, list | None]]):
    """A memory recipe that measures full whatever pass the job names, as scripts whose
    bench_memory_* never read the mode do."""

    def build(case: _Case, mode: str, *, for_memory: bool) -> tuple[Closure, list | None]:
        return style(case, "full", for_memory=for_memory)

    return build


_STYLES = {
    "autograd_grad": _autograd_grad,
    "fixed_dy": _fixed_dy,
    "random_dy": _random_dy,
    "scalar_loss": _scalar_loss,
    "fixed_dy_release": _fixed_dy_release,
    "ones_dy": _ones_dy,
    "scalar_loss_retain": _scalar_loss_retain,
    "fixed_dy_full": _always_full(_fixed_dy),
    "scalar_loss_retain_full": _always_full(_scalar_loss_retain),
    "scalar_loss_full": _always_full(_scalar_loss),
    "lm_head_loss": _lm_head_loss,
    "lm_head_loss_full": _always_full(_lm_head_loss),
    "frozen_input_loss": _frozen_input_loss,
    "frozen_input_loss_full": _always_full(_frozen_input_loss),
    "fresh_dy_ids": _fresh_dy_ids,
    "fresh_dy_ids_full": _always_full(_fresh_dy_ids),
    "fixed_dys_release": _fixed_dys_release,
    "fixed_dys_release_full": _always_full(_fixed_dys_release),
    "mhc_loss": _mhc_loss,
    "mhc_loss_full": _always_full(_mhc_loss),
}


def _build(
    spec: KernelSpec,
    impl: Impl,
    wl: dict[str, Any],
    device: Any,
    gen: Any,
    mode: str,
    for_memory: bool,
):
    if mode not in ("forward", "backward", "full", "no-grad-forward"):
        raise ValueError(f"unknown pass {mode!r}")
    case = _Case(spec, impl, wl, device, gen, for_memory=for_memory)
    style = spec.recipe(for_memory)
    if mode == "no-grad-forward":
        # The forward, which the caller times under torch.no_grad() (runner._latency), as
        # the scripts that have this pass (cross_entropy, fused_linear_cross_entropy from
        # Liger-Kernel 0.6.3) wrap their do_bench call; they pass no grad_to_none.
        fn, _ = _STYLES[style](case, "forward", for_memory=for_memory)
        return fn, None
    return _STYLES[style](case, mode, for_memory=for_memory)


def speed_closure(
    spec: KernelSpec, impl: Impl, wl: dict[str, Any], device: Any, gen: Any, mode: str
) -> tuple[Closure, list | None]:
    """(fn, grad_to_none) for do_bench, as the upstream bench_speed_* function makes them."""
    return _build(spec, impl, wl, device, gen, mode, for_memory=False)


def memory_closure(
    spec: KernelSpec, impl: Impl, wl: dict[str, Any], device: Any, gen: Any, mode: str
) -> Closure:
    """fn for _test_memory, as the upstream bench_memory_* function makes it."""
    fn, _ = _build(spec, impl, wl, device, gen, mode, for_memory=True)
    return fn

"""fused_add_rms_norm: benchmark/scripts/benchmark_fused_add_rms_norm.py at Liger-Kernel ab7fe2a.

x and residual r `randn(M, H)` (H the swept x; M 2048, float32, eps 1e-6 in the config), dy
and ds randn_like drawn once. Every cell builds all three modules, `.to(device)` (parameters
float32): `LigerFusedAddRMSNorm(hidden_size=H, eps)` (provider `liger_fused_add_rms_norm`),
the script's `NaiveAddRMSNorm` (`huggingface`) and its `AddLigerRMSNorm` (`liger_rms_norm`:
the same sum in eager torch, then `LigerRMSNorm(H, eps, in_place=False)` and the outer
weight), the two script classes re-implemented here with the same operations in the same
order, and calls one; each returns (normed, residual sum). Speed: forward; backward
`torch.autograd.backward((y, s), (dy, ds), retain_graph=True)` on one forward; full a forward
and that call freeing the graph; grad_to_none=[x, r]; rep 500. Memory: full only, freeing the
graph as the speed full does.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..building import Impl, KernelSpec, randn, torch_dtype, torch_info
from ..impls import Unavailable, load_liger
from ..workload import Param

_SCRIPT = "Liger-Kernel benchmark_fused_add_rms_norm.py (re-implemented in kirunner)"


def script_modules(hidden: int, eps: float, liger_rms_norm_cls):
    """The script's NaiveAddRMSNorm and, where LigerRMSNorm is importable, AddLigerRMSNorm."""
    import torch

    class NaiveAddRMSNorm(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(hidden))
            self.variance_epsilon = eps

        def _norm(self, h):
            variance = h.pow(2).mean(-1, keepdim=True)
            return h * torch.rsqrt(variance + self.variance_epsilon)

        def forward(self, hidden_states, residual):
            input_dtype = hidden_states.dtype
            h = hidden_states.to(torch.float32) + residual.to(torch.float32)
            return self.weight * self._norm(h).to(input_dtype), h.to(input_dtype)

    class AddLigerRMSNorm(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(hidden))
            self.variance_epsilon = eps
            self.rms_norm = liger_rms_norm_cls(hidden, eps, in_place=False)

        def forward(self, hidden_states, residual):
            input_dtype = hidden_states.dtype
            h = hidden_states.to(torch.float32) + residual.to(torch.float32)
            return self.weight * self.rms_norm(h).to(input_dtype), h.to(input_dtype)

    add_liger = AddLigerRMSNorm() if liger_rms_norm_cls is not None else None
    return NaiveAddRMSNorm(), add_liger


@dataclass(frozen=True)
class FusedAddRmsNormSpec(KernelSpec):
    def make_inputs(self, wl, device, gen):
        dtype = torch_dtype(wl["dtype"])
        shape = (wl["M"], wl["hidden"])
        return {"x": randn(shape, dtype, device, gen), "r": randn(shape, dtype, device, gen)}

    def _liger(self, wl, revision, device_type):
        """(LigerFusedAddRMSNorm module, LigerRMSNorm class, info) or an Unavailable."""
        fused_mod, info = load_liger(
            "liger_kernel.transformers.fused_add_rms_norm", revision, device_type=device_type
        )
        rms_mod, _ = load_liger(
            "liger_kernel.transformers.rms_norm", revision, device_type=device_type
        )
        fused = fused_mod.LigerFusedAddRMSNorm(hidden_size=wl["hidden"], eps=wl["eps"])
        return fused, rms_mod.LigerRMSNorm, info

    def build(self, wl, provider, device, revision):
        import torch

        fused, rms_cls, info, missing = None, None, None, None
        try:
            fused, rms_cls, info = self._liger(wl, revision, torch.device(device).type)
        except Unavailable as exc:
            if provider != "huggingface":
                raise
            missing = str(exc)
        naive, add_liger = script_modules(wl["hidden"], wl["eps"], rms_cls)
        resident = tuple(m.to(device) for m in (fused, naive, add_liger) if m is not None)
        if provider == "liger_fused_add_rms_norm":
            module = fused
        elif provider == "liger_rms_norm":
            module = add_liger
            info.notes.append(f"AddLigerRMSNorm as defined in {_SCRIPT}")
        else:
            module = naive
            info = torch_info(f"NaiveAddRMSNorm as defined in {_SCRIPT}")
        if missing:
            info.notes.append(f"the script's Liger modules were not built: {missing}")
        return Impl(
            lambda v, _r=resident: tuple(module(v["x"], v["r"])),
            info,
            module=module,
            eps=wl["eps"],
        )

    def reference(self, views, params, wl, impl):
        import torch

        h = views["x"].to(torch.float64) + views["r"].to(torch.float64)
        y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + impl.eps)
        if "rms_norm.weight" in params:  # AddLigerRMSNorm: LigerRMSNorm's weight, then its own
            y = y * params["rms_norm.weight"]
        return (params["weight"] * y, h)


SPECS = (
    FusedAddRmsNormSpec(
        name="fused_add_rms_norm",
        script="benchmark/scripts/benchmark_fused_add_rms_norm.py",
        providers=("liger_fused_add_rms_norm", "huggingface", "liger_rms_norm"),
        upstream_rep=500,
        style="fixed_dys_release",
        memory_style="fixed_dys_release_full",
        params=(
            Param("M", ("bt", "BT", "rows"), help="rows of the (M, H) inputs"),
            Param("hidden", ("H", "N", "hidden_size"), help="the swept x"),
            Param("eps", kind="float"),
            Param("dtype", kind="dtype"),
        ),
        inputs=("x", "r"),
        outputs=("y", "residual"),
        small_caps={"M": 32, "hidden": 256},
    ),
)

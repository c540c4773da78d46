"""poly_norm: benchmark/scripts/benchmark_poly_norm.py at Liger-Kernel ab7fe2a.

x `randn(M, H)` (H the swept x; M 2048, bfloat16, eps 1e-6 in the config), dy = randn_like(x)
drawn once. Every cell builds both modules, `LigerPolyNorm(eps=eps).to(device)` (its default
in_place=True: the backward overwrites dy, the same dy every timed call, as upstream) and the
script's `NaivePolyNorm(eps=eps).to(device)` (its `huggingface` line, re-implemented here with
the same operations in the same order), parameters float32 as built, and calls one. Speed:
forward; backward `y.backward(dy, retain_graph=True)` on one forward; full a forward and that;
grad_to_none=[x]; rep 500. Memory: full only.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..building import Impl, KernelSpec, randn, torch_dtype, torch_info
from ..impls import Unavailable, load_liger
from ..workload import Param


def naive_poly_norm(eps: float):
    """The script's NaivePolyNorm: y = w0*norm(x^3) + w1*norm(x^2) + w2*norm(x) + b in float32,
    norm(u) = u * rsqrt(mean(u^2) + eps), cast back to the input dtype."""
    import torch

    class NaivePolyNorm(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.full((3,), 1.0 / 3.0))
            self.bias = torch.nn.Parameter(torch.tensor(1.0))
            self.variance_epsilon = eps

        def _norm(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)

        def forward(self, hidden_states):
            input_dtype = hidden_states.dtype
            hidden_states = hidden_states.to(torch.float32)
            x3, x2, x1 = hidden_states**3, hidden_states**2, hidden_states**1
            w = self.weight
            out = w[0] * self._norm(x3) + w[1] * self._norm(x2) + w[2] * self._norm(x1) + self.bias
            return out.to(input_dtype)

    return NaivePolyNorm()


def reference_poly_norm(x, weight, bias, eps):
    """float64 PolyNorm."""
    import torch

    x = x.to(torch.float64)

    def norm(u):
        return u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + eps)

    return weight[0] * norm(x**3) + weight[1] * norm(x**2) + weight[2] * norm(x) + bias


@dataclass(frozen=True)
class PolyNormSpec(KernelSpec):
    def make_inputs(self, wl, device, gen):
        return {"x": randn((wl["M"], wl["hidden"]), torch_dtype(wl["dtype"]), device, gen)}

    def build(self, wl, provider, device, revision):
        import torch

        liger, missing = None, None
        try:
            mod, liger_info = load_liger(
                "liger_kernel.transformers.poly_norm",
                revision,
                device_type=torch.device(device).type,
            )
            liger = mod.LigerPolyNorm(eps=wl["eps"]).to(device)
        except Unavailable as exc:
            if provider == "liger":
                raise
            missing = str(exc)
        naive = naive_poly_norm(wl["eps"]).to(device)
        if provider == "liger":
            module, info = liger, liger_info
        else:
            module = naive
            info = torch_info(
                "NaivePolyNorm as defined in Liger-Kernel benchmark_poly_norm.py "
                "(re-implemented in kirunner)"
            )
        if missing:
            info.notes.append(f"the script's LigerPolyNorm companion was not built: {missing}")
        resident = (liger, naive)
        return Impl(lambda v, _r=resident: (module(v["x"]),), info, module=module, eps=wl["eps"])

    def reference(self, views, params, wl, impl):
        return (reference_poly_norm(views["x"], params["weight"], params["bias"], impl.eps),)


SPECS = (
    PolyNormSpec(
        name="poly_norm",
        script="benchmark/scripts/benchmark_poly_norm.py",
        providers=("liger", "huggingface"),
        upstream_rep=500,
        style="fixed_dy",
        memory_style="fixed_dy_full",
        params=(
            Param("M", ("bt", "BT", "rows"), help="rows of the (M, H) input"),
            Param("hidden", ("H", "N", "hidden_size"), help="the swept x"),
            Param("eps", kind="float"),
            Param("dtype", kind="dtype"),
        ),
        inputs=("x",),
        outputs=("y",),
        small_caps={"M": 32, "hidden": 256},
    ),
)

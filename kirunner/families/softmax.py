"""softmax: benchmark/scripts/benchmark_softmax.py at Liger-Kernel 02bac05.

Speed: x `[M, N]` (M 2048; float32 or bfloat16), dy = randn_like(x) drawn once; forward
`softmax(x)`; backward `y.backward(dy, retain_graph=True)` on one forward; full a forward and
that backward (retain_graph=True too); grad_to_none [x]; rep 500. Providers: `liger`
(`LigerSoftmax().to(device).to(dtype)`) and `torch` (`torch.nn.Softmax(dim=-1)`).

Memory (`bench_memory_softmax`): upstream builds x with `shape = input.x`, i.e. a 1-D tensor
of N elements, not `[M, N]`, and backpropagates ones: reproduced as written (the recorded
peak is what that script measures).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..building import Impl, KernelSpec, randn, torch_dtype, torch_info
from ..impls import load_liger
from ..workload import Param


def reference_softmax(x):
    """float64 softmax over the last dimension."""
    import torch

    x = x.to(torch.float64)
    shifted = x - x.max(dim=-1, keepdim=True).values
    e = shifted.exp()
    return e / e.sum(dim=-1, keepdim=True)


@dataclass(frozen=True)
class SoftmaxSpec(KernelSpec):
    def make_inputs(self, wl, device, gen):
        return {"x": randn((wl["M"], wl["hidden"]), torch_dtype(wl["dtype"]), device, gen)}

    def memory_inputs(self, wl, device, gen):
        # `torch.randn(shape, ...)` with shape = input.x = N: one row of N elements.
        return {"x": randn((wl["hidden"],), torch_dtype(wl["dtype"]), device, gen)}

    def build(self, wl, provider, device, revision):
        import torch

        if provider == "torch":
            module = torch.nn.Softmax(dim=-1).to(device)
            info = torch_info("torch.nn.Softmax(dim=-1)")
        else:
            mod, info = load_liger(
                "liger_kernel.transformers.softmax", revision, device_type=torch.device(device).type
            )
            module = mod.LigerSoftmax().to(device).to(torch_dtype(wl["dtype"]))
        return Impl(lambda v: (module(v["x"]),), info)

    def reference(self, views, params, wl, impl):
        return (reference_softmax(views["x"]),)


SPECS = (
    SoftmaxSpec(
        name="softmax",
        script="benchmark/scripts/benchmark_softmax.py",
        providers=("liger", "torch"),
        upstream_rep=500,
        style="fixed_dy",
        memory_style="ones_dy",
        params=(
            Param("M", ("bt", "BT", "rows"), help="rows of the (M, N) input"),
            Param("hidden", ("N", "hidden_size")),
            Param("dtype", kind="dtype", default="fp32", required=False),
        ),
        inputs=("x",),
        outputs=("y",),
        small_caps={"M": 32, "hidden": 256},
    ),
)

"""DyT (dynamic tanh): benchmark/scripts/benchmark_dyt.py at Liger-Kernel 02bac05.

Upstream's kernel names are `dyt_beta=False` and `dyt_beta=True`, one per `beta` setting.
x `[BT, hidden]` (BT 4096, bfloat16), dy = randn_like(x) drawn once. The modules are built as
the script builds them, `.to(device)` only, so their parameters stay float32:
- `liger`: `LigerDyT(hidden_size, beta)` (liger_kernel.transformers.dyt);
- `torch`: the test suite's `TorchDyT`, `gamma * tanh(x * alpha) + beta` (beta left out when
  False), written here with the same parameters and operation order (alpha `ones(1) * 0.5`,
  gamma ones, beta zeros);
- `torch_compile`: `torch.compile(TorchDyT(...))`, compiled at its first call (the check's).
Forward `dyt(x)`; backward `y.backward(dy, retain_graph=True)`; full a forward and
`y.backward(dy)` *without* retain_graph (speed) or with it (memory); grad_to_none [x]; rep 500.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..impls import load_liger
from ..kernels import Impl, KernelSpec, _randn, _torch_info, torch_dtype
from ..workload import Param, WorkloadError


def torch_dyt(hidden: int, beta: bool):
    """The upstream test suite's TorchDyT (test/transformers/test_dyt.py at 02bac05)."""
    import torch

    class TorchDyT(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.alpha = torch.nn.Parameter(torch.ones(1) * 0.5)
            self.gamma = torch.nn.Parameter(torch.ones(hidden))
            self.beta = torch.nn.Parameter(torch.zeros(hidden)) if beta else None

        def forward(self, x):
            if self.beta is None:
                return self.gamma * torch.tanh(x * self.alpha)
            return self.gamma * torch.tanh(x * self.alpha) + self.beta

    return TorchDyT()


def reference_dyt(x, alpha, gamma, beta):
    import torch

    y = gamma * torch.tanh(x.to(torch.float64) * alpha)
    return y + beta if beta is not None else y


@dataclass(frozen=True)
class DytSpec(KernelSpec):
    beta: bool = False

    def validate(self, wl):
        if wl["beta"] != self.beta:
            raise WorkloadError(f"{self.name} has beta={self.beta}, the job says beta={wl['beta']}")

    def make_inputs(self, wl, device, gen):
        return {"x": _randn((wl["bt"], wl["hidden"]), torch_dtype(wl["dtype"]), device, gen)}

    def build(self, wl, provider, device, revision):
        import torch

        if provider == "liger":
            mod, info = load_liger(
                "liger_kernel.transformers.dyt", revision, device_type=torch.device(device).type
            )
            module = mod.LigerDyT(hidden_size=wl["hidden"], beta=self.beta).to(device)
            call = module
        else:
            module = torch_dyt(wl["hidden"], self.beta).to(device)
            call = torch.compile(module) if provider == "torch_compile" else module
            what = "TorchDyT (Liger-Kernel test/transformers/test_dyt.py at 02bac05)"
            info = _torch_info(("torch.compile of " if provider == "torch_compile" else "") + what)
        return Impl(lambda v: (call(v["x"]),), info, module=module)

    def reference(self, views, params, wl, impl):
        return (reference_dyt(views["x"], params["alpha"], params["gamma"], params.get("beta")),)


def _spec(beta: bool) -> DytSpec:
    return DytSpec(
        name=f"dyt_beta={beta}",
        script="benchmark/scripts/benchmark_dyt.py",
        providers=("liger", "torch", "torch_compile"),
        upstream_rep=500,
        style="fixed_dy_release",
        params=(
            Param("bt", ("BT",), help="rows of the (BT, hidden) input"),
            Param("hidden", ("hidden_size",)),
            Param("beta", kind="bool"),
            Param("dtype", kind="dtype"),
        ),
        inputs=("x",),
        outputs=("y",),
        small_caps={"bt": 32, "hidden": 256},
        beta=beta,
    )


SPECS = (_spec(False), _spec(True))

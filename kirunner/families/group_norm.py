"""group_norm: benchmark/scripts/benchmark_group_norm.py at Liger-Kernel 02bac05.

The sweep is over C (num_channels, 32 to 2048); the fixed config is M 128, H 512,
channels_per_group 4, float32, eps 1e-6. x `[M, C, H]` (the CSV's H, normalised to `hidden`,
is the spatial length, not a hidden size), dy = randn_like(x) drawn once. Both modules are
built with num_groups = C // channels_per_group and the config's eps, `.to(device)` only:
- `liger`: `LigerGroupNorm(num_channels=C, num_groups=..., eps=eps)` (weight ones, bias zeros);
- `huggingface`: `torch.nn.GroupNorm(num_groups=..., num_channels=C, eps=eps)`.
Speed: forward `gn(x)`; backward `y.backward(dy, retain_graph=True)` on one forward; full a
forward and that backward; grad_to_none [x] in all three; rep 500.
Memory (`bench_memory_group_norm`): run for the passes full, forward and backward, but the
function never reads the pass: every memory row measures full (forward and the backward with
retain_graph=True). Reproduced as written (memory style `fixed_dy_full`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..building import Impl, KernelSpec, randn, torch_dtype, torch_info
from ..impls import load_liger
from ..workload import Param, WorkloadError


def reference_group_norm(x, weight, bias, groups: int, eps: float):
    """float64 group norm of x `[M, C, *]` over each group's channels and positions."""
    import torch

    x = x.to(torch.float64)
    m, c = x.shape[0], x.shape[1]
    g = x.reshape(m, groups, -1)
    mean = g.mean(dim=-1, keepdim=True)
    var = (g - mean).pow(2).mean(dim=-1, keepdim=True)  # biased, as GroupNorm normalises
    y = ((g - mean) / torch.sqrt(var + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.dim() - 2)
    return y * weight.reshape(shape) + bias.reshape(shape)


@dataclass(frozen=True)
class GroupNormSpec(KernelSpec):
    def validate(self, wl):
        if wl["C"] % wl["channels_per_group"]:
            raise WorkloadError(
                f"group_norm: C {wl['C']} is not a multiple of channels_per_group "
                f"{wl['channels_per_group']}"
            )

    def scale_down(self, wl):
        small = super().scale_down(wl)
        per = wl["channels_per_group"]
        small["C"] = per * min(wl["C"] // per, 8)  # whole groups, at most 8 of them
        return small

    @staticmethod
    def groups(wl) -> int:
        return wl["C"] // wl["channels_per_group"]

    def make_inputs(self, wl, device, gen):
        shape = (wl["M"], wl["C"], wl["hidden"])
        return {"x": randn(shape, torch_dtype(wl["dtype"]), device, gen)}

    def build(self, wl, provider, device, revision):
        import torch

        if provider == "huggingface":
            module = torch.nn.GroupNorm(
                num_groups=self.groups(wl), num_channels=wl["C"], eps=wl["eps"]
            ).to(device)
            info = torch_info("torch.nn.GroupNorm")
        else:
            mod, info = load_liger(
                "liger_kernel.transformers.group_norm",
                revision,
                device_type=torch.device(device).type,
            )
            module = mod.LigerGroupNorm(
                num_channels=wl["C"], num_groups=self.groups(wl), eps=wl["eps"]
            ).to(device)
        return Impl(lambda v: (module(v["x"]),), info, module=module, eps=wl["eps"])

    def reference(self, views, params, wl, impl):
        y = reference_group_norm(
            views["x"], params["weight"], params["bias"], self.groups(wl), impl.eps
        )
        return (y,)


SPECS = (
    GroupNormSpec(
        name="group_norm",
        script="benchmark/scripts/benchmark_group_norm.py",
        providers=("liger", "huggingface"),
        upstream_rep=500,
        style="fixed_dy",
        memory_style="fixed_dy_full",
        params=(
            Param("C", ("num_channels",), help="channels (the swept x)"),
            Param("M", help="leading dimension of the (M, C, H) input"),
            Param("hidden", ("H",), help="upstream's H: the trailing (spatial) length"),
            Param("channels_per_group", ()),
            Param("eps", kind="float"),
            Param("dtype", kind="dtype"),
        ),
        inputs=("x",),
        outputs=("y",),
        small_caps={"M": 4, "hidden": 64},
    ),
)

"""tiled_geglu, tiled_swiglu: benchmark/scripts/benchmark_tiled_mlp.py at Liger-Kernel ab7fe2a.

One script, two kernel names (its `activation_type`, geglu or swiglu). x `randn(bsz, T,
hidden_size)` requiring grad (T the swept x), a `LlamaConfig(hidden_size, intermediate_size,
hidden_act)` and one module per cell, only the provider's, `.to(device).to(dtype)`:
`huggingface` transformers' `LlamaMLP`; `liger` `LigerGEGLUMLP` / `LigerSwiGLUMLP`;
`liger_tiled` `LigerTiledGEGLUMLP` / `LigerTiledSwiGLUMLP(config, num_shards)`;
`deepspeed_tiled` the script's `DeepSpeedTiledMLPWrapper` (DeepSpeed 0.18.2's TiledMLP
autograd function around a LlamaMLP, re-implemented here with the same operations in the same
order: a no-grad sharded forward, and a backward that recomputes each shard's forward and
backpropagates it into a slice of a zeroed x gradient). rep 10.

Speed (style `random_dy`): forward with grad_to_none=[x]; backward `y.backward(do,
retain_graph=True)` with do = randn_like(x) drawn once; full a forward and
`y.backward(randn_like(y), retain_graph=True)`, the draw timed. Memory runs the pass the row
names with the same closures (the script's bench_memory reads the mode).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..building import Impl, KernelSpec, hf_info, randn, torch_dtype
from ..impls import load_liger, load_transformers
from ..workload import Param, WorkloadError

# kernel -> (activation_type, liger module and class, tiled liger class)
VARIANTS = {
    "tiled_geglu": ("geglu", "liger_kernel.transformers.geglu", "LigerGEGLUMLP",
                    "LigerTiledGEGLUMLP"),
    "tiled_swiglu": ("swiglu", "liger_kernel.transformers.swiglu", "LigerSwiGLUMLP",
                     "LigerTiledSwiGLUMLP"),
}  # fmt: skip
TILED_MODULE = "liger_kernel.transformers.tiled_mlp"


def _deepspeed_tiled_function():
    """DeepSpeed's TiledMLP (runtime/sequence_parallel/ulysses_sp.py at v0.18.2) as the script
    carries it: the forward runs the shards under no_grad and keeps only x; the backward runs
    each shard's forward again with grad and backpropagates it into its slice of x's grad."""
    import torch

    class DeepSpeedTiledMLP(torch.autograd.Function):
        @staticmethod
        def forward(ctx, fn, module, x, shards, compute_params):
            ctx.fn, ctx.module, ctx.shards = fn, module, shards
            ctx.compute_params = [p for p in compute_params if p.requires_grad]
            ctx.save_for_backward(x)
            x_shards = list(torch.chunk(x, chunks=shards, dim=-2))
            with torch.no_grad():
                outs = [fn(module, s) for s in x_shards]
            return torch.cat(outs, dim=-2)

        @staticmethod
        def backward(ctx, *grads):
            (x,) = ctx.saved_tensors
            x_requires_grad = x.requires_grad
            x = x.detach()
            x.requires_grad_(x_requires_grad)
            hidden, shape = x.shape[-1], x.shape
            x = x.view(-1, hidden)
            incoming = grads[0].view(-1, hidden)
            x_grad = torch.zeros_like(x)
            x_shards = list(torch.chunk(x, chunks=ctx.shards, dim=0))
            for i, x_shard in enumerate(x_shards):
                # (DeepSpeed's ds_grad_is_ready flags: no parameter here has one.)
                x_shard.requires_grad_(x_requires_grad)
                step, offset = x_shards[i].shape[0], i * x_shards[0].shape[0]
                x_shard.grad = x_grad.narrow(0, offset, step).view_as(x_shard)
                incoming_shard = incoming.narrow(0, offset, step).view_as(x_shard)
                with torch.enable_grad():
                    out = ctx.fn(ctx.module, x_shard)
                torch.autograd.backward(out, incoming_shard)
            return (None, None, x_grad.view(shape), None, None)

    return DeepSpeedTiledMLP


def deepspeed_tiled_mlp(llama, config, num_shards):
    """The script's DeepSpeedTiledMLPWrapper: a LlamaMLP as `self.mlp`, run through TiledMLP."""
    import torch

    function = _deepspeed_tiled_function()

    def mlp_forward(mlp, x):
        return mlp.down_proj(mlp.act_fn(mlp.gate_proj(x)) * mlp.up_proj(x))

    class DeepSpeedTiledMLPWrapper(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.num_shards = num_shards
            self.mlp = llama.LlamaMLP(config=config)

        def forward(self, x):
            shards = self.num_shards
            if shards is None:
                shards = math.ceil(x.shape[-2] / x.shape[-1])
            shards = max(1, shards)
            params = [self.mlp.down_proj.weight, self.mlp.gate_proj.weight, self.mlp.up_proj.weight]
            return function.apply(mlp_forward, self.mlp, x, shards, params)

    return DeepSpeedTiledMLPWrapper()


@dataclass(frozen=True)
class TiledMlpSpec(KernelSpec):
    def validate(self, wl):
        want = VARIANTS[self.name][0]
        if wl["activation_type"] != want:
            raise WorkloadError(
                f"{self.name} has activation_type={want}, the job says {wl['activation_type']}"
            )

    def make_inputs(self, wl, device, gen):
        shape = (wl["batch"], wl["seq"], wl["hidden"])
        return {"x": randn(shape, torch_dtype(wl["dtype"]), device, gen)}

    def build(self, wl, provider, device, revision):
        import torch

        _, liger_module, liger_class, tiled_class = VARIANTS[self.name]
        cfg_mod, hf_version = load_transformers("transformers.models.llama.configuration_llama")
        config = cfg_mod.LlamaConfig(
            hidden_size=wl["hidden"],
            intermediate_size=wl["intermediate"],
            hidden_act=wl["hidden_act"],
        )
        shards = wl["num_shards"]
        device_type = torch.device(device).type
        # Built straight on the device: the same modules and parameter dtypes as upstream's
        # .to(device).to(dtype), without initialising the weights on the CPU first.
        if provider in ("huggingface", "deepspeed_tiled"):
            llama, _ = load_transformers("transformers.models.llama.modeling_llama")
            with torch.device(device):
                if provider == "huggingface":
                    module = llama.LlamaMLP(config=config)
                    what = "transformers.models.llama.modeling_llama.LlamaMLP"
                else:
                    module = deepspeed_tiled_mlp(llama, config, shards)
                    what = (
                        "DeepSpeedTiledMLPWrapper of Liger-Kernel benchmark_tiled_mlp.py "
                        "(DeepSpeed 0.18.2 TiledMLP around LlamaMLP; re-implemented in kirunner)"
                    )
            info = hf_info(what, hf_version)
        else:
            tiled = provider == "liger_tiled"
            mod, info = load_liger(
                TILED_MODULE if tiled else liger_module, revision, device_type=device_type
            )
            with torch.device(device):
                if tiled:
                    module = getattr(mod, tiled_class)(config=config, num_shards=shards)
                else:
                    module = getattr(mod, liger_class)(config=config)
            info.notes.append(f"LlamaConfig from transformers {hf_version}")
        module = module.to(device).to(torch_dtype(wl["dtype"]))
        return Impl(lambda v: (module(v["x"]),), info, module=module)

    def reference(self, views, params, wl, impl):
        from .. import reference as ref

        def weight(name):
            return params.get(f"{name}.weight", params.get(f"mlp.{name}.weight"))

        act = wl["hidden_act"]
        return (ref.gated_mlp(views["x"], weight("gate_proj"), weight("up_proj"),
                              weight("down_proj"), act),)  # fmt: skip


def _spec(name: str, act: str) -> TiledMlpSpec:
    return TiledMlpSpec(
        name=name,
        script="benchmark/scripts/benchmark_tiled_mlp.py",
        providers=("huggingface", "liger", "liger_tiled", "deepspeed_tiled"),
        upstream_rep=10,
        style="random_dy",
        params=(
            Param("batch", ("B", "bsz", "batch_size")),
            Param("seq", ("T", "seq_len"), help="sequence length (the swept x)"),
            Param("hidden", ("H", "hidden_size")),
            Param("intermediate", ("intermediate_size",)),
            Param("hidden_act", kind="str", default=act, required=False),
            Param("activation_type", kind="str", default=VARIANTS[name][0], required=False),
            Param("num_shards", kind="int", default=None, required=False),
            Param("dtype", kind="dtype"),
        ),
        inputs=("x",),
        outputs=("y",),
        small_caps={"batch": 2, "seq": 32, "hidden": 64, "intermediate": 160},
    )


SPECS = (_spec("tiled_geglu", "gelu_pytorch_tanh"), _spec("tiled_swiglu", "silu"))

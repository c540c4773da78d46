"""One spec per kernel: parameters, inputs, providers and reference, as upstream set them up.

Each spec mirrors the Liger-Kernel benchmark script named in ``script`` at the releases
whose rows we re-measure (0.5.10 to 0.6.2; the setup code of these seven scripts did not
change across them): the same tensor shapes, layouts, dtypes, module construction and
timing ``style`` (see protocol.py). Where the installed library has moved on (transformers
5 dropped ``position_ids`` from ``apply_rotary_pos_emb``), the adaptation is recorded in
the result's implementation notes.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from . import reference as ref
from .building import Impl, KernelSpec, hf_info, randn, torch_dtype, torch_info
from .families import FAMILY_SPECS
from .impls import Unavailable, load_liger, load_transformers
from .workload import Param, WorkloadError

__all__ = ["KERNELS", "Impl", "KernelSpec", "get_spec"]


_DTYPE = Param("dtype", kind="dtype")
_SEQ = Param("seq", ("T", "seq_len", "sequence_length"))
_HIDDEN = Param("hidden", ("H", "hidden_size"))
_Q_HEADS = Param("q_heads", ("num_q_heads", "num_attention_heads"))
_KV_HEADS = Param("kv_heads", ("num_kv_heads", "num_key_value_heads"))
_BATCH = Param("batch", ("B", "bsz", "batch_size"))
_ROWS = Param("M", ("bt", "BT", "rows"), help="rows of the (M, hidden) input")
_EPS = Param("eps", kind="float")


# ----------------------------------------------------------------------------------------
# RoPE (Llama, rotate-half) and Llama 4 RoPE (interleaved complex pairs)
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _RopeBase(KernelSpec):
    def validate(self, wl: dict[str, Any]) -> None:
        if wl["hidden"] % wl["q_heads"]:
            raise WorkloadError(
                f"{self.name}: hidden {wl['hidden']} is not a multiple of q_heads {wl['q_heads']}"
            )
        if (wl["hidden"] // wl["q_heads"]) % 2:
            raise WorkloadError(f"{self.name}: head_dim must be even")
        if wl["q_heads"] % wl["kv_heads"]:
            raise WorkloadError(f"{self.name}: q_heads must be a multiple of kv_heads")

    def scale_down(self, wl: dict[str, Any]) -> dict[str, Any]:
        small = dict(wl)
        head_dim = wl["hidden"] // wl["q_heads"]
        group = wl["q_heads"] // wl["kv_heads"]
        kv = min(wl["kv_heads"], 2)
        q = kv * min(group, 4)
        small.update(seq=min(wl["seq"], 64), kv_heads=kv, q_heads=q, hidden=q * min(head_dim, 32))
        return small

    @staticmethod
    def head_dim(wl: dict[str, Any]) -> int:
        return wl["hidden"] // wl["q_heads"]


@dataclass(frozen=True)
class RopeSpec(_RopeBase):
    def make_inputs(self, wl, device, gen):
        dtype, d = torch_dtype(wl["dtype"]), self.head_dim(wl)
        # Upstream allocates (1, seq, heads, d) and benchmarks its transpose(1, 2) view.
        return {
            "q": randn((1, wl["seq"], wl["q_heads"], d), dtype, device, gen),
            "k": randn((1, wl["seq"], wl["kv_heads"], d), dtype, device, gen),
        }

    def views(self, leaves):
        return {"q": leaves["q"].transpose(1, 2), "k": leaves["k"].transpose(1, 2)}

    def build(self, wl, provider, device, revision):
        import torch

        llama, hf_version = load_transformers("transformers.models.llama.modeling_llama")
        cfg_mod, _ = load_transformers("transformers.models.llama.configuration_llama")
        d, dtype = self.head_dim(wl), torch_dtype(wl["dtype"])
        notes: list[str] = []
        try:
            # Upstream passes num_kv_heads, which LlamaConfig does not know; only head_dim matters.
            config = cfg_mod.LlamaConfig(num_kv_heads=wl["kv_heads"], head_dim=d)
        except TypeError:
            config = cfg_mod.LlamaConfig(head_dim=d)
        rotary = llama.LlamaRotaryEmbedding(config=config).to(device)
        pos_ids = torch.arange(wl["seq"], device=device, dtype=torch.long).unsqueeze(0)
        cos, sin = rotary(torch.empty((), dtype=dtype, device=device), pos_ids)
        notes.append(f"cos/sin from transformers {hf_version} LlamaRotaryEmbedding")

        if provider == "huggingface":
            apply = llama.apply_rotary_pos_emb
            if "position_ids" in inspect.signature(apply).parameters:

                def fwd(v):
                    return apply(v["q"], v["k"], cos, sin, pos_ids)
            else:
                notes.append(
                    "position_ids not passed: this transformers removed the (unused) argument"
                )

                def fwd(v):
                    return apply(v["q"], v["k"], cos, sin)

            return Impl(
                fwd,
                hf_info(
                    "transformers.models.llama.modeling_llama.apply_rotary_pos_emb",
                    hf_version,
                    notes,
                ),
            )
        mod, info = load_liger(
            "liger_kernel.transformers.rope", revision, device_type=torch.device(device).type
        )
        info.notes.extend(notes)

        def liger_fwd(v):
            return mod.liger_rotary_pos_emb(v["q"], v["k"], cos, sin, pos_ids)

        return Impl(liger_fwd, info)

    def reference(self, views, params, wl, impl):
        return ref.rope_half(views["q"], views["k"])


@dataclass(frozen=True)
class Llama4RopeSpec(_RopeBase):
    def make_inputs(self, wl, device, gen):
        dtype, d = torch_dtype(wl["dtype"]), self.head_dim(wl)
        return {
            "q": randn((1, wl["seq"], wl["q_heads"], d), dtype, device, gen),
            "k": randn((1, wl["seq"], wl["kv_heads"], d), dtype, device, gen),
        }

    def build(self, wl, provider, device, revision):
        import torch

        l4, hf_version = load_transformers("transformers.models.llama4.modeling_llama4")
        cfg_mod, _ = load_transformers("transformers.models.llama4.configuration_llama4")
        d = self.head_dim(wl)
        config = cfg_mod.Llama4TextConfig(
            hidden_size=wl["hidden"],
            num_attention_heads=wl["q_heads"],
            num_key_value_heads=wl["kv_heads"],
            head_dim=d,
            max_position_embeddings=wl["seq"],
            rope_theta=ref.ROPE_THETA,
            rope_scaling=None,
        )
        rotary = l4.Llama4TextRotaryEmbedding(config=config).to(device)
        pos_ids = torch.arange(wl["seq"], device=device, dtype=torch.long).unsqueeze(0)
        freqs_cis = rotary(torch.empty((), dtype=torch_dtype(wl["dtype"]), device=device), pos_ids)
        notes = [
            f"freqs_cis from transformers {hf_version} Llama4TextRotaryEmbedding (rope_theta=10000)"
        ]
        if provider == "huggingface":

            def fwd(v):
                return l4.apply_rotary_emb(v["q"], v["k"], freqs_cis)

            return Impl(
                fwd,
                hf_info(
                    "transformers.models.llama4.modeling_llama4.apply_rotary_emb", hf_version, notes
                ),
            )
        mod, info = load_liger(
            "liger_kernel.transformers.llama4_rope", revision, device_type=torch.device(device).type
        )
        info.notes.extend(notes)

        def liger_fwd(v):
            return mod.liger_llama4_text_rotary_pos_emb(v["q"], v["k"], freqs_cis)

        return Impl(liger_fwd, info)

    def reference(self, views, params, wl, impl):
        return ref.rope_interleaved(views["q"], views["k"])


# ----------------------------------------------------------------------------------------
# Norms
# ----------------------------------------------------------------------------------------
def _script_llama_rms_norm(hidden: int, eps: float) -> Any:
    """The LlamaRMSNorm that benchmark_rms_norm.py defines for its 'huggingface' line.

    Same operation order as that class (and as transformers' LlamaRMSNorm): upcast to
    float32, normalise, cast back to the input dtype, then multiply by a float32 weight
    (so a bf16 input gives a float32 output, as it did upstream).
    """
    import torch
    from torch import nn

    class ScriptLlamaRMSNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden))
            self.variance_epsilon = eps

        def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
            input_dtype = hidden_states.dtype
            h = hidden_states.to(torch.float32)
            variance = h.pow(2).mean(-1, keepdim=True)
            h = h * torch.rsqrt(variance + self.variance_epsilon)
            return self.weight * h.to(input_dtype)

    return ScriptLlamaRMSNorm()


@dataclass(frozen=True)
class RmsNormSpec(KernelSpec):
    def make_inputs(self, wl, device, gen):
        return {"x": randn((wl["M"], wl["hidden"]), torch_dtype(wl["dtype"]), device, gen)}

    def build(self, wl, provider, device, revision):
        import torch

        if provider == "huggingface":
            module = _script_llama_rms_norm(wl["hidden"], wl["eps"]).to(device)
            info = torch_info(
                "LlamaRMSNorm as defined in Liger-Kernel benchmark_rms_norm.py (re-implemented in kirunner)"
            )
        else:
            mod, info = load_liger(
                "liger_kernel.transformers.rms_norm",
                revision,
                device_type=torch.device(device).type,
            )
            module = mod.LigerRMSNorm(hidden_size=wl["hidden"], eps=wl["eps"]).to(device)
        return Impl(lambda v: (module(v["x"]),), info, module=module, eps=wl["eps"])

    def reference(self, views, params, wl, impl):
        return (ref.rms_norm(views["x"], params["weight"], impl.eps),)


@dataclass(frozen=True)
class LayerNormSpec(KernelSpec):
    def make_inputs(self, wl, device, gen):
        return {"x": randn((wl["M"], wl["hidden"]), torch_dtype(wl["dtype"]), device, gen)}

    def build(self, wl, provider, device, revision):
        import torch

        if provider == "huggingface":
            # The script's 'huggingface' line is torch.nn.LayerNorm.
            module = torch.nn.LayerNorm(wl["hidden"], eps=wl["eps"]).to(device)
            info = torch_info("torch.nn.LayerNorm")
            eps = module.eps
        else:
            mod, info = load_liger(
                "liger_kernel.transformers.layer_norm",
                revision,
                device_type=torch.device(device).type,
            )
            # Upstream builds LigerLayerNorm(hidden_size=N) without passing eps.
            module = mod.LigerLayerNorm(hidden_size=wl["hidden"]).to(device)
            eps = float(getattr(module, "variance_epsilon", getattr(module, "eps", 1e-6)))
            if eps != wl["eps"]:
                info.notes.append(
                    f"LigerLayerNorm built with its default eps={eps} as upstream did (job eps={wl['eps']})"
                )
        return Impl(lambda v: (module(v["x"]),), info, module=module, eps=eps)

    def reference(self, views, params, wl, impl):
        return (ref.layer_norm(views["x"], params["weight"], params.get("bias"), impl.eps),)


# ----------------------------------------------------------------------------------------
# Gated MLPs
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GatedMlpSpec(KernelSpec):
    liger_module: str = ""
    liger_class: str = ""

    def make_inputs(self, wl, device, gen):
        return {
            "x": randn(
                (wl["batch"], wl["seq"], wl["hidden"]), torch_dtype(wl["dtype"]), device, gen
            )
        }

    def build(self, wl, provider, device, revision):
        import torch

        cfg_mod, hf_version = load_transformers("transformers.models.llama.configuration_llama")
        config = cfg_mod.LlamaConfig(
            hidden_size=wl["hidden"],
            intermediate_size=wl["intermediate"],
            hidden_act=wl["hidden_act"],
        )
        dtype = torch_dtype(wl["dtype"])
        # Built straight on the device: same modules and parameter dtypes as upstream's
        # .to(device).to(dtype), without initialising half a gigabyte of weights on the CPU.
        if provider == "huggingface":
            llama, _ = load_transformers("transformers.models.llama.modeling_llama")
            with torch.device(device):
                module = llama.LlamaMLP(config=config)
            info = hf_info("transformers.models.llama.modeling_llama.LlamaMLP", hf_version)
        else:
            mod, info = load_liger(
                self.liger_module, revision, device_type=torch.device(device).type
            )
            with torch.device(device):
                module = getattr(mod, self.liger_class)(config=config)
            info.notes.append(f"LlamaConfig from transformers {hf_version}")
        module = module.to(device).to(dtype)
        return Impl(lambda v: (module(v["x"]),), info, module=module)

    def reference(self, views, params, wl, impl):
        return (
            ref.gated_mlp(
                views["x"],
                params["gate_proj.weight"],
                params["up_proj.weight"],
                params["down_proj.weight"],
                wl["hidden_act"],
            ),
        )


# ----------------------------------------------------------------------------------------
# Cross entropy
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CrossEntropySpec(KernelSpec):
    def make_inputs(self, wl, device, gen):
        import torch

        rows = wl["batch"] * wl["seq"]
        logits = randn((rows, wl["vocab"]), torch_dtype(wl["dtype"]), device, gen)
        target = torch.randint(wl["vocab"], (rows, 1), device=device, generator=gen).squeeze(1)
        return {"logits": logits, "target": target}

    def build(self, wl, provider, device, revision):
        import torch

        if provider == "huggingface":
            # The script's 'huggingface' line is torch.nn.CrossEntropyLoss.
            loss = torch.nn.CrossEntropyLoss(ignore_index=wl["ignore_index"])
            info = torch_info("torch.nn.CrossEntropyLoss")
        else:
            mod, info = load_liger(
                "liger_kernel.transformers.cross_entropy",
                revision,
                device_type=torch.device(device).type,
            )
            loss = mod.LigerCrossEntropyLoss(ignore_index=wl["ignore_index"])
        return Impl(lambda v: (loss(v["logits"], v["target"]),), info)

    def reference(self, views, params, wl, impl):
        return (ref.cross_entropy(views["logits"], views["target"], wl["ignore_index"]),)


_ROPE_PARAMS = (_SEQ, _HIDDEN, _Q_HEADS, _KV_HEADS, _DTYPE)
_MLP_CAPS = {"batch": 2, "seq": 16, "hidden": 64, "intermediate": 160}
_NORM_CAPS = {"M": 32, "hidden": 256}

KERNELS: dict[str, KernelSpec] = {
    spec.name: spec
    for spec in (
        Llama4RopeSpec(
            name="llama4_rope",
            script="benchmark/scripts/benchmark_llama4_rope.py",
            providers=("liger", "huggingface"),
            upstream_rep=400,
            style="autograd_grad",
            params=_ROPE_PARAMS,
            inputs=("q", "k"),
            outputs=("q_out", "k_out"),
        ),
        RopeSpec(
            name="rope",
            script="benchmark/scripts/benchmark_rope.py",
            providers=("liger", "huggingface"),
            upstream_rep=400,
            style="autograd_grad",
            params=_ROPE_PARAMS,
            inputs=("q", "k"),
            outputs=("q_out", "k_out"),
        ),
        RmsNormSpec(
            name="rms_norm",
            script="benchmark/scripts/benchmark_rms_norm.py",
            providers=("liger", "huggingface"),
            upstream_rep=500,
            style="fixed_dy",
            params=(_ROWS, Param("hidden", ("H", "N", "hidden_size")), _EPS, _DTYPE),
            inputs=("x",),
            outputs=("y",),
            small_caps=_NORM_CAPS,
        ),
        LayerNormSpec(
            name="layer_norm",
            script="benchmark/scripts/benchmark_layer_norm.py",
            providers=("liger", "huggingface"),
            upstream_rep=500,
            style="fixed_dy",
            params=(_ROWS, Param("hidden", ("N", "H", "hidden_size")), _EPS, _DTYPE),
            inputs=("x",),
            outputs=("y",),
            small_caps=_NORM_CAPS,
        ),
        GatedMlpSpec(
            name="swiglu",
            script="benchmark/scripts/benchmark_swiglu.py",
            providers=("liger", "huggingface"),
            upstream_rep=10,
            style="random_dy",
            params=(
                _BATCH,
                _SEQ,
                _HIDDEN,
                Param("intermediate", ("intermediate_size",)),
                Param("hidden_act", kind="str", default="silu", required=False),
                _DTYPE,
            ),
            inputs=("x",),
            outputs=("y",),
            derived={"bt": ("batch", "seq"), "BT": ("batch", "seq")},
            small_caps=_MLP_CAPS,
            liger_module="liger_kernel.transformers.swiglu",
            liger_class="LigerSwiGLUMLP",
        ),
        GatedMlpSpec(
            name="geglu",
            script="benchmark/scripts/benchmark_geglu.py",
            providers=("liger", "huggingface"),
            upstream_rep=10,
            style="random_dy",
            params=(
                _BATCH,
                _SEQ,
                _HIDDEN,
                Param("intermediate", ("intermediate_size",)),
                Param("hidden_act", kind="str", default="gelu_pytorch_tanh", required=False),
                _DTYPE,
            ),
            inputs=("x",),
            outputs=("y",),
            derived={"bt": ("batch", "seq"), "BT": ("batch", "seq")},
            small_caps=_MLP_CAPS,
            liger_module="liger_kernel.transformers.geglu",
            liger_class="LigerGEGLUMLP",
        ),
        CrossEntropySpec(
            name="cross_entropy",
            script="benchmark/scripts/benchmark_cross_entropy.py",
            providers=("liger", "huggingface"),
            upstream_rep=100,
            style="scalar_loss",
            params=(
                _BATCH,
                _SEQ,
                Param("vocab", ("V", "vocab_size")),
                # Upstream never sets a dtype: torch.randn's default, float32.
                Param("dtype", kind="dtype", default="fp32", required=False),
                Param("ignore_index", kind="sint", default=-100, required=False),
            ),
            inputs=("logits",),
            outputs=("loss",),
            derived={"bt": ("batch", "seq"), "BT": ("batch", "seq")},
            small_caps={"batch": 2, "seq": 32, "vocab": 512},
        ),
    )
}
# Kernels added per family, one module each (kirunner/families/): KERNELS is the one registry.
KERNELS.update({spec.name: spec for spec in FAMILY_SPECS})


def get_spec(name: str) -> KernelSpec:
    try:
        return KERNELS[name]
    except KeyError:
        raise Unavailable(
            f"benchmark {name!r} is not supported by this runner (supported: {', '.join(sorted(KERNELS))})"
        ) from None

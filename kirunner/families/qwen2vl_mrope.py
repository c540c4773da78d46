"""qwen2vl_mrope: benchmark/scripts/benchmark_qwen2vl_mrope.py at Liger-Kernel ab7fe2a.

Two sweeps: hidden (H 512, 2048, 8192 at seq 2048) and seq (T 1024..16384 at hidden 8192),
both with 32 q heads, 8 kv heads, bfloat16. head_dim = hidden / q_heads, mrope_section =
[head_dim/2 - 2*s, s, s] with s = head_dim*3 // 16. q `randn(1, seq, q_heads, head_dim)` and
k `randn(1, seq, kv_heads, head_dim)`, requiring grad, benchmarked as their transpose(1, 2)
views; dq, dk randn_like those views, drawn once. Position ids `arange(3*seq).view(3, 1, -1)`
(temporal, height and width positions 0..seq-1, seq..2seq-1, 2seq..3seq-1); cos, sin from
`Qwen2VLRotaryEmbedding(Qwen2VLTextConfig(hidden, heads, rope_theta=1e6, mrope_section))`,
shaped (3, 1, seq, head_dim) in the input dtype. Providers: `liger`
(`liger_multimodal_rotary_pos_emb(q, k, cos, sin, mrope_section)`) and `huggingface`
(transformers' `apply_multimodal_rotary_pos_emb`). rep 400; style `autograd_grad` (backward
`autograd.grad((q_out, k_out), (q, k), (dq, dk), allow_unused=True, retain_graph=True)`, full
without retain_graph, memory full with it).

The script needs transformers 4 (the CI that published the rows had it): transformers 5 folds
the section interleave into Qwen2VLRotaryEmbedding and dropped
`apply_multimodal_rotary_pos_emb`. Where the installed transformers lacks it, both the rotary
embedding (default rope, cos/sin of `cat(freqs, freqs)` per section) and the function are
transformers 4.57's, re-implemented here with the same operations in the same order, and the
result's implementation notes say so.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..building import Impl, KernelSpec, hf_info, randn, torch_dtype
from ..impls import load_liger, load_transformers
from ..workload import Param, WorkloadError

ROPE_THETA = 1000000.0
HF_MODULE = "transformers.models.qwen2_vl.modeling_qwen2_vl"


def mrope_section(head_dim: int) -> list[int]:
    s = head_dim * 3 // 16
    return [head_dim // 2 - 2 * s, s, s]


def rotary_cos_sin(seq: int, head_dim: int, dtype, device):
    """transformers 4.57 Qwen2VLRotaryEmbedding (default rope) at the script's position ids:
    (cos, sin), each (3, 1, seq, head_dim) in `dtype`, computed in float32."""
    import torch

    inv_freq = 1.0 / (
        ROPE_THETA
        ** (
            torch.arange(0, head_dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float)
            / head_dim
        )
    )
    pos_ids = torch.arange(seq * 3, device=device, dtype=torch.long).view(3, 1, -1)
    inv_freq_expanded = inv_freq[None, None, :, None].float().expand(3, pos_ids.shape[1], -1, 1)
    pos_expanded = pos_ids[:, :, None, :].float()
    freqs = (inv_freq_expanded.float() @ pos_expanded.float()).transpose(2, 3)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype=dtype), emb.sin().to(dtype=dtype)


def _rotate_half(x):
    import torch

    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_multimodal_rotary_pos_emb(q, k, cos, sin, section, unsqueeze_dim=1):
    """transformers 4.57's apply_multimodal_rotary_pos_emb."""
    import torch

    section = section * 2
    cos = torch.cat([m[i % 3] for i, m in enumerate(cos.split(section, dim=-1))], dim=-1)
    sin = torch.cat([m[i % 3] for i, m in enumerate(sin.split(section, dim=-1))], dim=-1)
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (_rotate_half(q) * sin), (k * cos) + (_rotate_half(k) * sin)


def reference_mrope(q, k, section):
    """float64 M-RoPE from the definition: frequency i of section j (temporal, height, width)
    turns by the position of grid j, which the script sets to j*seq + t."""
    import torch

    seq, head_dim = q.shape[-2], q.shape[-1]
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64, device=q.device) / head_dim
    inv_freq = (1.0 / (ROPE_THETA**exponents)).to(torch.float32).to(torch.float64)
    grid = torch.repeat_interleave(
        torch.arange(3, device=q.device), torch.tensor(section, device=q.device)
    )
    pos = torch.arange(seq, dtype=torch.float64, device=q.device)[:, None] + grid[None, :] * seq
    angles = pos * inv_freq[None, :]
    angles = torch.cat((angles, angles), dim=-1)
    cos, sin = angles.cos(), angles.sin()
    return (q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin)


@dataclass(frozen=True)
class Qwen2VLMropeSpec(KernelSpec):
    def validate(self, wl):
        if wl["hidden"] % wl["q_heads"] or (wl["hidden"] // wl["q_heads"]) % 2:
            raise WorkloadError(f"{self.name}: hidden / q_heads must be an even whole number")

    def scale_down(self, wl):
        return {**wl, "seq": min(wl["seq"], 64), "q_heads": 4, "kv_heads": 2,
                "hidden": 4 * min(wl["hidden"] // wl["q_heads"], 32)}  # fmt: skip

    def make_inputs(self, wl, device, gen):
        dtype, d = torch_dtype(wl["dtype"]), wl["hidden"] // wl["q_heads"]
        return {
            "q": randn((1, wl["seq"], wl["q_heads"], d), dtype, device, gen),
            "k": randn((1, wl["seq"], wl["kv_heads"], d), dtype, device, gen),
        }

    def views(self, leaves):
        return {"q": leaves["q"].transpose(1, 2), "k": leaves["k"].transpose(1, 2)}

    def _hf(self, wl, dtype, device):
        """(apply function, cos, sin, notes): transformers' own where it has the script's
        function, else transformers 4.57's re-implemented."""
        hf, version = load_transformers(HF_MODULE)
        d, section = wl["hidden"] // wl["q_heads"], mrope_section(wl["hidden"] // wl["q_heads"])
        apply = getattr(hf, "apply_multimodal_rotary_pos_emb", None)
        if apply is not None:
            cfg_mod, _ = load_transformers("transformers.models.qwen2_vl.configuration_qwen2_vl")
            config = cfg_mod.Qwen2VLTextConfig(
                hidden_size=wl["hidden"], num_attention_heads=wl["q_heads"],
                num_key_value_heads=wl["kv_heads"], rope_theta=ROPE_THETA, mrope_section=section,
            )  # fmt: skip
            import torch

            rotary = hf.Qwen2VLRotaryEmbedding(config, device=device)
            pos_ids = torch.arange(wl["seq"] * 3, device=device, dtype=torch.long).view(3, 1, -1)
            cos, sin = rotary(torch.empty((), dtype=dtype, device=device), pos_ids)
            return apply, cos, sin, version, [f"cos/sin from transformers {version}"]
        cos, sin = rotary_cos_sin(wl["seq"], d, dtype, device)
        notes = [
            f"transformers {version} has no apply_multimodal_rotary_pos_emb: it and "
            "Qwen2VLRotaryEmbedding are transformers 4.57's, re-implemented in kirunner"
        ]
        return apply_multimodal_rotary_pos_emb, cos, sin, version, notes

    def build(self, wl, provider, device, revision):
        import torch

        dtype = torch_dtype(wl["dtype"])
        section = mrope_section(wl["hidden"] // wl["q_heads"])
        apply, cos, sin, version, notes = self._hf(wl, dtype, device)
        if provider == "huggingface":
            info = hf_info(f"{HF_MODULE}.apply_multimodal_rotary_pos_emb", version, notes)
        else:
            mod, info = load_liger(
                "liger_kernel.transformers.qwen2vl_mrope",
                revision,
                device_type=torch.device(device).type,
            )
            info.notes.extend(notes)
            apply = mod.liger_multimodal_rotary_pos_emb
        return Impl(lambda v: tuple(apply(v["q"], v["k"], cos, sin, section)), info)

    def reference(self, views, params, wl, impl):
        return reference_mrope(views["q"], views["k"], mrope_section(wl["hidden"] // wl["q_heads"]))


SPECS = (
    Qwen2VLMropeSpec(
        name="qwen2vl_mrope",
        script="benchmark/scripts/benchmark_qwen2vl_mrope.py",
        providers=("liger", "huggingface"),
        upstream_rep=400,
        style="autograd_grad",
        params=(
            Param("seq", ("T", "seq_len", "sequence_length")),
            Param("hidden", ("H", "hidden_size")),
            Param("q_heads", ("num_q_heads", "num_attention_heads")),
            Param("kv_heads", ("num_kv_heads", "num_key_value_heads")),
            Param("dtype", kind="dtype"),
        ),
        inputs=("q", "k"),
        outputs=("q_out", "k_out"),
    ),
)

"""embedding: benchmark/scripts/benchmark_embedding.py at Liger-Kernel ab7fe2a.

Every cell builds all three providers' modules, in this order: `torch_emb =
Embedding(V, D).to(device).to(dtype)`, `liger_emb = LigerEmbedding(V, D).to(device).to(dtype)`
(liger_kernel.transformers.experimental.embedding) and `torch.compile(torch_emb)`, then ids
`randint(0, V, (B, T))`, and calls one: `liger`, `huggingface` (the plain torch Embedding: the
script's else branch) or `torch_compile`. Both weights stay resident, so both count in the
peak (at V 131072, D 4096 in float32, 2 GiB each). The swept x is V; B, T, D and dtype (float32
in every config) come from the config. rep 100.

Speed: forward `emb(ids)` with no grad_to_none; backward `y.backward(randn_like(y),
retain_graph=True)` on one forward, the draw timed, grad_to_none=[ids]; full a forward and
`y.backward(randn_like(y))`. Memory: full only (`_test_memory(full)`), as upstream.
"""

from __future__ import annotations

import types
from dataclasses import dataclass

from ..building import Impl, KernelSpec, torch_dtype, torch_info
from ..impls import Unavailable, load_liger
from ..workload import Param

LIGER_MODULE = "liger_kernel.transformers.experimental.embedding"


def torch_embedding(vocab: int, dim: int):
    """torch.nn.Embedding(vocab, dim) whose forward has a code object of its own: dynamo keys
    its compiled entries and its recompile limit by code object, so a job's compile state is
    its own, not what earlier jobs of a batch left on nn.Embedding.forward."""
    import torch

    fwd = torch.nn.Embedding.forward
    own = types.FunctionType(
        fwd.__code__.replace(), fwd.__globals__, fwd.__name__, fwd.__defaults__, fwd.__closure__
    )
    cls = type("Embedding", (torch.nn.Embedding,), {"forward": own})
    return cls(vocab, dim)


@dataclass(frozen=True)
class EmbeddingSpec(KernelSpec):
    def make_inputs(self, wl, device, gen):
        import torch

        shape = (wl["batch"], wl["seq"])
        return {"ids": torch.randint(0, wl["V"], shape, device=device, generator=gen)}

    def build(self, wl, provider, device, revision):
        import torch

        dtype = torch_dtype(wl["dtype"])
        # Built straight on the device: the same modules and parameter dtypes as upstream's
        # .to(device).to(dtype), without initialising gigabytes of weights on the CPU first.
        with torch.device(device):
            torch_emb = torch_embedding(wl["V"], wl["D"]).to(dtype)
        liger_emb, liger_missing = None, None
        try:
            mod, liger_info = load_liger(
                LIGER_MODULE, revision, device_type=torch.device(device).type
            )
            with torch.device(device):
                liger_emb = mod.LigerEmbedding(wl["V"], wl["D"]).to(dtype)
        except Unavailable as exc:
            if provider == "liger":
                raise
            liger_missing = str(exc)
        compiled = torch.compile(torch_emb)
        if provider == "liger":
            module, call, info = liger_emb, liger_emb, liger_info
        elif provider == "torch_compile":
            module, call = torch_emb, compiled
            info = torch_info("torch.compile(torch.nn.Embedding(V, D)), default inductor settings")
        else:
            module, call = torch_emb, torch_emb
            info = torch_info("torch.nn.Embedding(V, D)")
        if liger_missing:
            info.notes.append(
                f"the script's LigerEmbedding companion was not built: {liger_missing}"
            )
        resident = (torch_emb, liger_emb, compiled)
        return Impl(lambda v, _resident=resident: (call(v["ids"]),), info, module=module)

    def reference(self, views, params, wl, impl):
        return (params["weight"][views["ids"]],)


SPECS = (
    EmbeddingSpec(
        name="embedding",
        script="benchmark/scripts/benchmark_embedding.py",
        providers=("liger", "huggingface", "torch_compile"),
        upstream_rep=100,
        style="fresh_dy_ids",
        memory_style="fresh_dy_ids_full",
        params=(
            Param("V", ("vocab", "num_embeddings"), help="rows of the table (the swept x)"),
            Param("batch", ("B", "bsz", "batch_size")),
            Param("seq", ("T", "seq_len")),
            Param("D", ("embedding_dim",)),
            Param("dtype", kind="dtype", default="fp32", required=False),
        ),
        inputs=(),
        outputs=("y",),
        small_caps={"V": 512, "batch": 2, "seq": 64, "D": 64},
    ),
)

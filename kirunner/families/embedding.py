"""embedding: benchmark/scripts/benchmark_embedding.py at Liger-Kernel ab7fe2a.

Every cell builds all three providers' modules, in this order: `torch_emb =
Embedding(V, D).to(device).to(dtype)`, `liger_emb = LigerEmbedding(V, D).to(device).to(dtype)`
(liger_kernel.transformers.experimental.embedding) and `torch.compile(torch_emb)`, then ids
`randint(0, V, (B, T))`, and calls one: `liger`, `huggingface` (the plain torch Embedding: the
script's else branch) or `torch_compile`. Both weights stay resident, so both count in the
peak (at V 131072, D 4096 in float32, 2 GiB each). The swept x is V; B, T, D and dtype (float32
in every config) come from the config. rep 100.

`torch_compile` runs as it ran in the script's process (see :func:`upstream_compiled`):
compiled in the BERT config (D 768), dynamo's eager fallback in the Llama config (D 4096).

Speed: forward `emb(ids)` with no grad_to_none; backward `y.backward(randn_like(y),
retain_graph=True)` on one forward, the draw timed, grad_to_none=[ids]; full a forward and
`y.backward(randn_like(y))`. Memory: full only (`_test_memory(full)`), as upstream.
"""

from __future__ import annotations

import functools
import types
from dataclasses import dataclass

from ..building import Impl, KernelSpec, torch_dtype, torch_info
from ..impls import Unavailable, load_liger
from ..workload import Param
from .dyt import fall_back_to_eager, recompile_limit

LIGER_MODULE = "liger_kernel.transformers.experimental.embedding"

# The distinct graphs the script's torch_compile provider asks dynamo for, in the order its
# process first meets them: the forward pass comes first (configs, then passes, then
# providers, then V), BERT (B 32, T 512, D 768) then Llama (B 8, T 2048, D 4096), V 2**10 to
# 2**17 each, float32. Every later pass and the memory run meet the same (B, T, D, V) again.
SCRIPT_CONFIGS = ((32, 512, 768), (8, 2048, 4096))
SCRIPT_V = tuple(2**i for i in range(10, 18))
SCRIPT_ORDER = tuple((*config, v) for config in SCRIPT_CONFIGS for v in SCRIPT_V)
SCRIPT_DTYPE = "fp32"


def upstream_compiled(batch: int, seq: int, dim: int, vocab: int, dtype: str, limit: int):
    """Whether torch.compile took effect for this cell in benchmark_embedding.py's process.

    Every cell's `torch.compile(Embedding(V, D))` compiles one frame shared by all of them
    (see :func:`compile_with_own_frame`), and the weight's shape is static (dynamo keeps
    parameters' shapes static), so each (B, T, D, V) is a graph of its own. dynamo compiles a
    frame at most `limit` times (8); at the next miss it runs it eager for the rest of the
    process, still using the entries it has. So the eight BERT forward cells compile, and
    every BERT cell of every pass (the memory run's included) finds its graph; the first
    Llama cell meets the limit, and every Llama cell runs eager. Liger's script run on an
    H100 (bench/fidelity/h100-ab7fe2a) reads just that: its BERT peaks are liger's, its
    Llama peaks huggingface's. None for a cell the script does not run."""
    cell = (batch, seq, dim, vocab)
    if dtype != SCRIPT_DTYPE or cell not in SCRIPT_ORDER:
        return None
    return SCRIPT_ORDER.index(cell) < limit


def compile_with_own_frame(module):
    """`torch.compile(module)`, whose compiled frame has a code object of its own.

    For a module of a torch.nn class dynamo does not compile the class's forward: trace_rules
    skip torch.nn's files, so OptimizedModule wraps the module in
    torch._dynamo.external_utils.wrap_inline's `inner` and compiles that frame. Every such
    compile in a process shares inner's code object, and with it dynamo's cache entries and
    recompile limit: in a runner batch the ninth torch_compile embedding job found the limit
    reached by the eight before it and ran eager, whatever its cell. Here the `inner` made for
    this module is a copy with a code object of its own (the same code), so a job's compile
    state is its own. Also returns whether that copy was made (a torch that no longer wraps
    torch.nn modules that way compiles the module as it does, and the result says so)."""
    import torch
    import torch._dynamo.external_utils as external_utils

    shared = external_utils.wrap_inline
    made: list[bool] = []

    def own_frame(fn):
        inner = shared(fn)
        code = inner.__code__.replace()  # a new code object: dynamo's entries live on it
        own = types.FunctionType(
            code, inner.__globals__, inner.__name__, inner.__defaults__, inner.__closure__
        )
        made.append(True)
        return functools.update_wrapper(own, fn)

    external_utils.wrap_inline = own_frame
    try:
        compiled = torch.compile(module)
    finally:
        external_utils.wrap_inline = shared
    return compiled, bool(made)


def _compiled_as_in_the_script(module, wl, device):
    """torch.compile(module) in the compile state of the script's process for this cell, and
    the notes saying which."""
    import torch

    call, own = compile_with_own_frame(module)
    notes = []
    if not own:
        notes.append(
            "this torch compiled the module without wrap_inline's frame: its compile state "
            "may be shared with earlier jobs of the process"
        )
    limit = recompile_limit()
    took = upstream_compiled(wl["batch"], wl["seq"], wl["D"], wl["V"], wl["dtype"], limit)
    if took is False:
        fall_back_to_eager(call, torch.zeros(1, 1, dtype=torch.long, device=device))
        first = SCRIPT_ORDER[0]
        return call, [
            *notes,
            "torch.compile did not take effect for this cell in the script's process "
            f"(dynamo's recompile limit, {limit}, was reached by the first {limit} cells it "
            f"met: B {first[0]}, T {first[1]}, D {first[2]}); it ran eager there, and runs "
            "eager here through the same fallback",
        ]
    if took:
        return call, [
            *notes,
            f"compiled, as in the script's process (one of the first {limit} cells it met, "
            "within dynamo's recompile limit)",
        ]
    return call, [*notes, "a cell the script does not run: compiled at its first call"]


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
            torch_emb = torch.nn.Embedding(wl["V"], wl["D"]).to(dtype)
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
        if provider == "torch_compile":
            compiled, notes = _compiled_as_in_the_script(torch_emb, wl, device)
        else:  # built as the script builds it for every cell, never called
            compiled, notes = torch.compile(torch_emb), []
        if provider == "liger":
            module, call, info = liger_emb, liger_emb, liger_info
        elif provider == "torch_compile":
            module, call = torch_emb, compiled
            what = "torch.compile(torch.nn.Embedding(V, D)), default inductor settings"
            info = torch_info(what, notes)
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

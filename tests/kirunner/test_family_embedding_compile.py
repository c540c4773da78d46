"""embedding torch_compile as it ran in benchmark_embedding.py's process at ab7fe2a: compiled
in the BERT config (its eight cells are the first graphs dynamo compiled there), eager in the
Llama config (the recompile limit was reached), whatever a runner batch compiled before."""

from __future__ import annotations

import functools
import importlib

import pytest
import torch
from torch._dynamo.utils import counters

from kirunner.kernels import get_spec

# After kirunner.kernels, which the families import from (imported first, they cycle).
embedding = importlib.import_module("kirunner.families.embedding")
dyt = importlib.import_module("kirunner.families.dyt")

BERT = {"batch": 32, "seq": 512, "D": 768, "dtype": "fp32"}
LLAMA = {"batch": 8, "seq": 2048, "D": 4096, "dtype": "fp32"}


@pytest.fixture
def eager_backend(monkeypatch):
    """dynamo's graphs run by its eager backend: what is compiled is the same, in no time."""
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="eager"))


def _graphs() -> int:
    return counters["stats"]["unique_graphs"]


def _job(wl: dict, ids_shape=(2, 3)):
    """Build the torch_compile job and run a forward and backward; the graphs it compiled,
    its output and the plain module's."""
    impl = get_spec("embedding").build(wl, "torch_compile", "cpu", "0.7.0")
    before = _graphs()
    ids = torch.randint(0, wl["V"], ids_shape)
    (y,) = impl.forward({"ids": ids})
    y.sum().backward()
    return impl, _graphs() - before, y, impl.module(ids)


@pytest.mark.parametrize(
    ("cell", "vocab", "expected"),
    [
        (BERT, 1024, True),  # the first graph the script compiles
        (BERT, 131072, True),  # the 8th
        (LLAMA, 1024, False),  # "hit config.recompile_limit (8)" in a replay of the script
        (LLAMA, 131072, False),
        ({**BERT, "dtype": "bf16"}, 1024, None),  # cells the script does not run
        ({**BERT, "batch": 2}, 1024, None),
        (BERT, 1000, None),
    ],
)
def test_the_eight_bert_cells_of_the_script_compile(cell, vocab, expected):
    args = (cell["batch"], cell["seq"], cell["D"], vocab, cell["dtype"])
    assert embedding.upstream_compiled(*args, 8) is expected


def test_the_limit_is_read():
    assert embedding.upstream_compiled(32, 512, 768, 16384, "fp32", 4) is False  # the 5th
    assert embedding.upstream_compiled(8, 2048, 4096, 1024, "fp32", 9) is True


def test_each_job_compiles_in_a_frame_of_its_own(eager_backend):
    """torch.compile of a torch.nn module compiles wrap_inline's `inner`, one code object for
    every such compile of the process: in a batch the ninth job met the limit the eight
    before it had reached, and ran eager. Each job's compile is now its own."""
    small = {"batch": 2, "seq": 3, "D": 4, "dtype": "fp32"}
    for vocab in range(16, 16 + dyt.recompile_limit() + 2):
        _, compiled_graphs, y, eager = _job({**small, "V": vocab})
        assert compiled_graphs == 1, vocab
        assert torch.equal(y, eager)


def test_a_bert_cell_is_compiled(eager_backend):
    impl, compiled_graphs, y, eager = _job({**BERT, "V": 1024})
    assert compiled_graphs == 1 and torch.equal(y, eager)
    assert any(n.startswith("compiled, as in the script's process") for n in impl.info.notes)


def test_a_llama_cell_runs_eager_through_dynamos_fallback(eager_backend):
    impl, compiled_graphs, y, eager = _job({**LLAMA, "V": 1024})
    assert compiled_graphs == 0 and torch.equal(y, eager)
    assert any("did not take effect" in n for n in impl.info.notes)


def test_the_script_module_is_torchs_own():
    """The plain torch.nn.Embedding the script builds (no subclass), resident with the
    compiled module for every provider."""
    wl = {**BERT, "V": 64, "D": 8}
    for provider in ("huggingface", "torch_compile"):
        impl = get_spec("embedding").build(wl, provider, "cpu", "0.7.0")
        assert type(impl.module) is torch.nn.Embedding
        (resident,) = impl.forward.__defaults__
        assert resident[0] is impl.module and resident[2]._orig_mod is impl.module

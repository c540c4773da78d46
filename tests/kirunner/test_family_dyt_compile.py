"""DyT torch_compile as it ran in benchmark_dyt.py's process at 02bac05: compiled for the
first 8 cells the script meets (dynamo's recompile limit), eager for the rest."""

from __future__ import annotations

import importlib

import pytest
import torch

from kirunner.kernels import get_spec

# After kirunner.kernels, which the families import from (imported first, they cycle).
dyt = importlib.import_module("kirunner.families.dyt")


@pytest.mark.parametrize(
    ("beta", "hidden", "expected"),
    [
        (False, 1024, True),
        (False, 8192, True),  # the 8th cell the script compiles
        (False, 9216, False),  # "hit config.recompile_limit (8)" in the script's log
        (False, 16384, False),
        (True, 1024, False),  # every beta=True cell comes after the limit
        (True, 16384, False),
    ],
)
def test_the_first_eight_cells_of_the_script_compile(beta, hidden, expected):
    assert dyt.upstream_compiled(beta, hidden, 4096, "bf16", 8) is expected


def test_a_cell_the_script_does_not_run_is_compiled_and_the_limit_is_read():
    assert dyt.upstream_compiled(False, 1024, 2048, "bf16", 8) is None
    assert dyt.upstream_compiled(False, 1024, 4096, "fp32", 8) is None
    assert dyt.upstream_compiled(False, 1000, 4096, "bf16", 8) is None
    assert dyt.upstream_compiled(False, 5120, 4096, "bf16", 4) is False
    assert dyt.recompile_limit() == torch._dynamo.config.recompile_limit


def test_each_module_has_a_forward_of_its_own():
    """dynamo keys its entries and its limit by code object: a batch's earlier DyT jobs must
    not use up this job's."""
    a, b = dyt.torch_dyt(64, False), dyt.torch_dyt(64, False)
    assert type(a).forward.__code__ is not type(b).forward.__code__
    x = torch.randn(3, 64)
    assert torch.equal(a(x), b(x))


def _unique_graphs() -> int:
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


def test_a_cell_past_the_limit_runs_eager_through_dynamos_fallback():
    """beta=False at hidden 9216: the script's dynamo had hit its limit; the runner's
    compiled module then compiles nothing and gives the eager output."""
    spec = get_spec("dyt_beta=False")
    wl = {"bt": 4096, "hidden": 9216, "beta": False, "dtype": "bf16"}
    impl = spec.build(wl, "torch_compile", "cpu", "0.6.0")
    assert any("did not take effect" in n for n in impl.info.notes)
    before = _unique_graphs()
    x = torch.randn(2, 9216)
    (y,) = impl.forward({"x": x})
    (y_again,) = impl.forward({"x": x})
    assert _unique_graphs() == before
    eager = impl.module.gamma * torch.tanh(x * impl.module.alpha)
    assert torch.equal(y, eager) and torch.equal(y_again, eager)


def test_the_scripts_other_modules_stay_resident():
    """The script builds the torch, the compiled and the liger module for every cell; their
    parameters are in its peak, so the runner keeps the same modules alive (liger's only
    where liger can run; the result says when it could not)."""
    spec = get_spec("dyt_beta=True")
    wl = {"bt": 4096, "hidden": 1024, "beta": True, "dtype": "bf16"}
    impl = spec.build(wl, "torch", "cpu", "0.6.0")
    (resident,) = impl.forward.__defaults__
    torch_module, compiled_module, liger_module = resident
    assert torch_module is impl.module and compiled_module is not impl.module
    assert isinstance(compiled_module, torch.nn.Module)
    assert liger_module is None
    assert any("LigerDyT companion" in n for n in impl.info.notes)

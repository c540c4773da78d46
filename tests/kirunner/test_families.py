"""The kernel families added per module (kirunner/families/): each closure and workload
against a fixture of upstream's parameters at Liger-Kernel 02bac05, on the CPU."""

from __future__ import annotations

import pytest
import torch

from kirunner import protocol, run_job
from kirunner.kernels import get_spec
from kirunner.workload import WorkloadError
from tests.kirunner.jobs import make_job

# Parameters exactly as the 02bac05 H200 rows carry them (runs.sources.parsers normalised).
UPSTREAM = {
    "softmax": {"M": 2048, "dtype": "fp32", "hidden": 128},
    "dyt_beta=False": {"bt": 4096, "dtype": "bf16", "beta": False, "hidden": 1024},
    "dyt_beta=True": {"bt": 4096, "dtype": "bf16", "beta": True, "hidden": 16384},
}
SCRIPT = {"softmax": ("torch", "liger"), "dyt_beta=False": ("torch", "torch_compile", "liger")}


@pytest.mark.parametrize("name", sorted(UPSTREAM))
def test_upstream_parameters_resolve(name):
    spec = get_spec(name)
    wl, unused = spec.resolve(UPSTREAM[name])
    assert unused == {} and wl["dtype"] in ("fp32", "bf16")
    assert spec.upstream_rep == 500  # both scripts pass rep=500
    assert set(SCRIPT.get(name, SCRIPT["dyt_beta=False"])) == set(spec.providers)


def test_dyt_beta_must_match_the_kernel_name():
    with pytest.raises(WorkloadError, match="beta"):
        get_spec("dyt_beta=True").resolve(UPSTREAM["dyt_beta=False"])


def _backward_calls(monkeypatch) -> list[dict]:
    calls: list[dict] = []
    original = torch.Tensor.backward

    def spy(self, gradient=None, retain_graph=None, **kw):
        calls.append({"retain_graph": retain_graph, "ones": bool((gradient == 1).all())})
        return original(self, gradient, retain_graph=retain_graph, **kw)

    monkeypatch.setattr(torch.Tensor, "backward", spy)
    return calls


def _closure(name, provider, mode, *, memory=False):
    spec = get_spec(name)
    wl = spec.scale_down(spec.resolve(UPSTREAM[name])[0])
    impl = spec.build(wl, provider, torch.device("cpu"), "0.6.0")
    gen = torch.Generator().manual_seed(0)
    make = protocol.memory_closure if memory else protocol.speed_closure
    return make(spec, impl, wl, torch.device("cpu"), gen, mode), wl


@pytest.mark.parametrize(
    "name,mode,memory,retain,ones",
    [
        ("dyt_beta=False", "full", False, None, False),  # speed full frees the graph
        ("dyt_beta=False", "full", True, True, False),  # memory full keeps it
        ("dyt_beta=True", "backward", False, True, False),
        ("softmax", "full", False, True, False),  # softmax's speed full keeps it
        ("softmax", "full", True, True, True),  # softmax's memory backpropagates ones
    ],
)
def test_closures_call_backward_as_upstream(monkeypatch, name, mode, memory, retain, ones):
    out, _ = _closure(name, "torch", mode, memory=memory)
    fn = out if memory else out[0]
    calls = _backward_calls(monkeypatch)
    fn()
    fn()
    assert calls and all(c == {"retain_graph": retain, "ones": ones} for c in calls)


def test_softmax_memory_input_is_one_row_of_n():
    spec = get_spec("softmax")
    wl = spec.resolve(UPSTREAM["softmax"])[0]
    x = spec.memory_inputs(wl, "cpu", torch.Generator().manual_seed(0))["x"]
    assert x.shape == (128,) and spec.make_inputs(wl, "cpu", torch.Generator())["x"].shape == (
        2048,
        128,
    )


def test_torch_dyt_keeps_float32_parameters_as_upstream():
    (fn, _), wl = _closure("dyt_beta=True", "torch", "forward")
    (y,) = fn()
    assert y.dtype == torch.float32  # bf16 x times float32 alpha: the script's dtype too


@pytest.mark.parametrize(
    "name,provider,pass_,metric",
    [
        ("softmax", "torch", "full", "latency"),
        ("softmax", "torch", "full", "memory"),
        ("dyt_beta=False", "torch", "full", "latency"),
        ("dyt_beta=True", "torch", "backward", "memory"),
    ],
)
def test_cpu_job_checks_against_float64_first(name, provider, pass_, metric):
    job = make_job(
        name, provider=provider, pass_=pass_, metric=metric, parameters=UPSTREAM[name], rep=5
    )
    payload = run_job(job, seed=1)["payload"]
    assert payload["status"] == "ok", payload["error"]
    assert payload["correctness"]["passed"]
    names = {c["name"] for c in payload["correctness"]["checks"]}
    assert "y" in names and "grad_x" in names
    if name.startswith("dyt"):
        assert {"grad_alpha", "grad_gamma"} <= names
    assert payload["workload"]["scaledDown"]


def test_liger_is_unavailable_on_the_cpu():
    job = make_job("softmax", provider="liger", parameters=UPSTREAM["softmax"])
    assert run_job(job)["payload"]["status"] == "unavailable"

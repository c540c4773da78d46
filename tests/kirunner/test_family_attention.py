"""The attention families (kirunner/families/neighborhood_attention.py and
multi_token_attention.py) against upstream's scripts at Liger-Kernel 02bac05 and its H200 CI
rows, on the CPU: parameters, shapes, the timed closures, the baselines and the float64
references."""

from __future__ import annotations

import importlib.util
import math
from collections import Counter

import pytest
import torch

from kirunner import protocol, run_job
from kirunner.kernels import get_spec
from kirunner.runner import support_problem
from kirunner.workload import WorkloadError
from runs.sources.parsers import parse_liger_csv
from tests.conftest import LIGER_CI
from tests.kirunner.issued import issued_documents
from tests.kirunner.jobs import make_job

# Through the registry: kirunner.kernels imports the families (importing a family module
# first would enter that import circle from the wrong end).
_NA = importlib.import_module("kirunner.families.neighborhood_attention")
_MTA = importlib.import_module("kirunner.families.multi_token_attention")
reference_neighborhood_attention = _NA.reference_neighborhood_attention
torch_neighborhood_attention = _NA.torch_neighborhood_attention
reference_multi_token_attention = _MTA.reference_multi_token_attention
sparsemax = _MTA.sparsemax
torch_multi_token_attention = _MTA.torch_multi_token_attention

KERNELS = ("fused_neighborhood_attention", "multi_token_attention", "sparse_multi_token_attention")
# One H200 row of each, exactly as runs.sources.parsers normalises it.
UPSTREAM = {
    "fused_neighborhood_attention": {
        "batch": 2, "hidden": 512, "heads": 8, "kernel_size": 7, "dilation": 2, "bias": True,
        "dtype": "fp32", "seq": 64,
    },
    "multi_token_attention": {
        "batch": 2, "C_in": 4, "C_out": 4, "K": 3, "groups": 1, "bias": True, "dtype": "bf16",
        "seq": 32,
    },
    "sparse_multi_token_attention": {
        "batch": 2, "C_in": 4, "C_out": 4, "K": 3, "groups": 1, "bias": True, "dtype": "fp32",
        "seq": 32,
    },
}  # fmt: skip


def _h200_rows():
    data = (LIGER_CI / "02bac05" / "benchmark.csv").read_bytes()
    rows = parse_liger_csv(data, "02bac05/benchmark.csv")
    return [r for r in rows if r.gpu_name == "NVIDIA H200" and r.benchmark in KERNELS]


def test_every_h200_row_of_02bac05_resolves_with_no_parameter_left_over():
    rows = _h200_rows()
    counts = Counter()
    for row in rows:
        spec = get_spec(row.benchmark)
        wl, unused = spec.resolve(row.params)
        assert unused == {} and row.provider in spec.providers, row.params
        assert wl["seq"] == int(row.sweep_value)  # the CSV's x (seq_len or L) is the sweep
        counts[row.benchmark] += 1
    assert counts == {
        "fused_neighborhood_attention": 448,
        "multi_token_attention": 40,
        "sparse_multi_token_attention": 40,
    }
    assert {row.timed_pass for row in rows if row.metric == "memory"} == {"full"}


@pytest.mark.django_db
def test_issue_jobs_issues_a_runnable_job_for_every_row():
    issued = Counter()
    for _, doc in issued_documents("all_h200", KERNELS):
        assert support_problem(doc) is None, doc["workload"]
        assert doc["protocol"]["rep"] is None  # the runner then uses the script's rep=100
        issued[doc["benchmark"], doc["provider"]] += 1
    assert sum(issued.values()) == 528
    assert set(issued) == {(k, p) for k in KERNELS for p in ("liger", "torch")}


@pytest.mark.parametrize("name", KERNELS)
def test_script_settings(name):
    spec = get_spec(name)
    assert spec.upstream_rep == 100  # every call of the three scripts passes rep=100
    assert spec.style == "fixed_dy" and spec.memory_style is None
    assert set(spec.providers) == {"liger", "torch"}


def test_neighborhood_attention_shapes_as_upstream():
    spec = get_spec("fused_neighborhood_attention")
    wl = spec.resolve(UPSTREAM["fused_neighborhood_attention"])[0]
    x = spec.make_inputs(wl, "cpu", torch.Generator().manual_seed(0))["x"]
    assert x.shape == (2, 64, 512) and x.dtype == torch.float32
    module = spec.build({**wl, "dtype": "bf16"}, "torch", torch.device("cpu"), None).module
    shapes = {n: (tuple(p.shape), p.dtype) for n, p in module.named_parameters()}
    for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
        assert shapes[f"{proj}.weight"] == ((512, 512), torch.bfloat16)  # .to(dtype), as upstream
        assert shapes[f"{proj}.bias"] == ((512,), torch.bfloat16)
    small = spec.scale_down(wl)
    assert small["hidden"] % small["heads"] == 0 and small["seq"] <= 32


def test_neighborhood_attention_keeps_the_other_providers_module_resident():
    """The script builds both modules and keeps both on the GPU while it measures either, so its
    peak memory counts two modules' weights; the runner read exactly one module's weights below
    it on every memory cell (2 to 16.016 MiB) until it kept one of the other's shapes too."""
    spec = get_spec("fused_neighborhood_attention")
    wl = {**spec.resolve(UPSTREAM["fused_neighborhood_attention"])[0], "dtype": "bf16"}
    impl = spec.build(wl, "torch", torch.device("cpu"), None)
    mine = {n: (tuple(p.shape), p.dtype) for n, p in impl.module.named_parameters()}
    other = {n: (tuple(p.shape), p.dtype) for n, p in impl.other_head.named_parameters()}
    assert other == mine and len(other) == 8  # four projections, weight and bias each
    assert impl.other_head is not impl.module
    assert not set(map(id, impl.other_head.parameters())) & set(map(id, impl.module.parameters()))


@pytest.mark.parametrize("name", KERNELS[1:])
def test_multi_token_attention_shapes_as_upstream(name):
    spec = get_spec(name)
    wl = spec.resolve(UPSTREAM[name])[0]
    x = spec.make_inputs(wl, "cpu", torch.Generator().manual_seed(0))["x"]
    dtype = torch.bfloat16 if name == "multi_token_attention" else torch.float32
    assert x.shape == (2, 4, 32, 32) and x.dtype == dtype
    module = spec.build(wl, "torch", torch.device("cpu"), None).module
    assert module.weight.shape == (4, 4, 3, 3) and module.weight.dtype == x.dtype
    assert torch.equal(module.bias, torch.zeros(4, dtype=x.dtype))  # liger's reset_parameters
    bound = 1 / math.sqrt(4 * 3 * 3)  # kaiming_uniform(a=sqrt(5)): U(-1/sqrt(fan_in), ...)
    assert module.weight.abs().max() <= bound


def test_the_torch_mask_loop_allows_exactly_the_neighbourhood():
    for kernel_size, dilation in ((7, 1), (7, 2), (9, 1)):
        module = torch_neighborhood_attention(16, 2, kernel_size, dilation, True)
        mask = module._create_neighborhood_mask(40, "cpu")
        i, j = torch.meshgrid(torch.arange(40), torch.arange(40), indexing="ij")
        offset = j - i
        want = (offset.abs() <= (kernel_size // 2) * dilation) & (offset % dilation == 0)
        assert torch.equal(mask, want)


def _float64_params(module):
    return {n: p.detach().double().requires_grad_(True) for n, p in module.named_parameters()}


@pytest.mark.parametrize("kernel_size,dilation", [(7, 1), (7, 2), (9, 1)])
def test_neighborhood_reference_is_the_dense_masked_attention(kernel_size, dilation):
    torch.manual_seed(0)
    module = torch_neighborhood_attention(32, 4, kernel_size, dilation, True).double()
    with torch.no_grad():
        module.k_proj.bias.normal_()  # a key bias the softmax must cancel
    x = torch.randn(2, 24, 32, dtype=torch.float64, requires_grad=True)
    params = _float64_params(module)
    want = module(x)
    got = reference_neighborhood_attention(x, params, 4, kernel_size, dilation)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    dy = torch.randn_like(got)
    g_ref = torch.autograd.grad(got, [x, params["q_proj.weight"]], dy)
    *g_mod, gb = torch.autograd.grad(want, [x, module.q_proj.weight, module.k_proj.bias], dy)
    for a, b in zip(g_ref, g_mod, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)
    # The dense module's key-bias gradient is rounding only: the reference's exact zero.
    assert gb.abs().max() < 1e-12


@pytest.mark.parametrize("sparse", [False, True])
def test_multi_token_reference_matches_the_scripts_baseline(sparse):
    wl = {"C_in": 4, "C_out": 4, "K": 3, "groups": 2, "bias": True, "dtype": "fp32"}
    torch.manual_seed(1)
    module = torch_multi_token_attention(wl, "cpu", sparse)
    with torch.no_grad():
        module.bias.normal_()
    x = torch.randn(2, 4, 20, 20)
    got = reference_multi_token_attention(
        x.double(), module.weight.double(), module.bias.double(), 3, 2, sparse
    )
    torch.testing.assert_close(module(x).double(), got, rtol=1e-5, atol=1e-5)
    future = torch.ones(20, 20, dtype=torch.bool).triu(1)
    assert (got[..., future] == 0).all()


def test_sparsemax_is_a_projection_onto_the_simplex():
    z = torch.randn(3, 5, 17, dtype=torch.float64) * 3
    p = sparsemax(z)
    assert (p >= 0).all() and torch.allclose(p.sum(-1), torch.ones(3, 5, dtype=torch.float64))
    assert (p == 0).any()  # sparse, unlike softmax
    # p = max(z - tau, 0) with one threshold tau per row: z - p is tau on the support, and
    # every entry off the support lies at or below it.
    support = p > 0
    tau = torch.where(support, z - p, torch.nan).nanmean(-1, keepdim=True)
    assert ((z - p - tau).abs()[support] < 1e-12).all()
    assert (z[~support] <= tau.expand_as(z)[~support]).all()


@pytest.mark.parametrize(
    "name,change,match",
    [
        ("fused_neighborhood_attention", {"heads": 7}, "multiple of heads"),
        ("fused_neighborhood_attention", {"kernel_size": 8}, "odd"),
        ("multi_token_attention", {"C_out": 8}, "C_out == C_in"),
        ("sparse_multi_token_attention", {"groups": 3}, "multiples of groups"),
        ("multi_token_attention", {"K": 4}, "odd"),
    ],
)
def test_workloads_upstream_could_not_run_are_refused(name, change, match):
    with pytest.raises(WorkloadError, match=match):
        get_spec(name).resolve({**UPSTREAM[name], **change})


def test_liger_sparse_path_is_float32_only():
    spec = get_spec("sparse_multi_token_attention")
    wl = spec.resolve({**UPSTREAM["sparse_multi_token_attention"], "dtype": "bf16"})[0]
    with pytest.raises(WorkloadError, match="fp32 only"):
        spec.build(wl, "liger", torch.device("cpu"), "0.6.0")


def _spy_backward(monkeypatch):
    calls: list[dict] = []
    original = torch.Tensor.backward

    def spy(self, gradient=None, retain_graph=None, **kw):
        calls.append({"retain_graph": retain_graph, "gradient": gradient, "graph": self.grad_fn})
        return original(self, gradient, retain_graph=retain_graph, **kw)

    monkeypatch.setattr(torch.Tensor, "backward", spy)
    return calls


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("mode,memory", [("backward", False), ("full", False), ("full", True)])
def test_closures_reuse_one_dy_and_keep_the_graph(monkeypatch, name, mode, memory):
    spec = get_spec(name)
    wl = spec.scale_down(spec.resolve(UPSTREAM[name])[0])
    impl = spec.build(wl, "torch", torch.device("cpu"), None)
    gen = torch.Generator().manual_seed(0)
    if memory:
        fn, g2n = protocol.memory_closure(spec, impl, wl, "cpu", gen, mode), None
    else:
        fn, g2n = protocol.speed_closure(spec, impl, wl, "cpu", gen, mode)
        assert [t.shape for t in g2n] == [spec.make_inputs(wl, "cpu", gen)["x"].shape]
    calls = _spy_backward(monkeypatch)
    for _ in range(3):
        fn()
    assert len(calls) == 3 and all(c["retain_graph"] is True for c in calls)
    assert all(c["gradient"] is calls[0]["gradient"] for c in calls)  # dy drawn once
    graphs = {id(c["graph"]) for c in calls}
    # backward times one forward's graph again and again; full makes a new one each call.
    assert len(graphs) == (1 if mode == "backward" else 3)


@pytest.mark.parametrize("name", KERNELS)
def test_forward_pass_names_x_in_grad_to_none(name):
    spec = get_spec(name)
    wl = spec.scale_down(spec.resolve(UPSTREAM[name])[0])
    impl = spec.build(wl, "torch", torch.device("cpu"), None)
    fn, g2n = protocol.speed_closure(spec, impl, wl, "cpu", torch.Generator(), "forward")
    (y,) = fn()
    assert len(g2n) == 1 and g2n[0].requires_grad and y.shape[0] == wl["batch"]


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize(
    "pass_,metric",
    [("forward", "latency"), ("backward", "latency"), ("full", "latency"), ("full", "memory")],
)
def test_cpu_job_checks_the_torch_baseline_against_float64(name, pass_, metric):
    # At each script's longest sequence (4096, 512): the CPU run caps it.
    longest = {**UPSTREAM[name], "seq": 4096 if name == KERNELS[0] else 512}
    job = make_job(
        name, provider="torch", pass_=pass_, metric=metric, parameters=longest,
        rep=5, revision="0.6.0",
    )  # fmt: skip
    payload = run_job(job, force_cpu=True, seed=2)["payload"]
    assert payload["status"] == "ok", payload["error"]
    assert payload["workload"]["scaledDown"] and payload["correctness"]["passed"]
    names = {c["name"] for c in payload["correctness"]["checks"]}
    assert "y" in names
    if pass_ != "forward":
        assert {"grad_x", "grad_bias"} <= names or {"grad_x", "grad_q_proj.bias"} <= names
    unit = payload["measurement"]["unit"]
    assert unit == ("ms" if metric == "latency" else "MiB")
    assert payload["measurement"]["median"] > 0


@pytest.mark.parametrize("name", KERNELS)
def test_liger_is_unavailable_on_the_cpu(name):
    job = make_job(name, provider="liger", parameters=UPSTREAM[name], revision="0.6.0")
    assert run_job(job, force_cpu=True)["payload"]["status"] == "unavailable"

"""The kernels new at Liger-Kernel ab7fe2a (kirunner/families/: embedding, tiled_mlp,
fused_add_rms_norm, poly_norm, qwen2vl_mrope, mhc): every H100 row of that commit's CI publication resolves to
the script's workload, the inputs and closures are built as the scripts build them, the
providers that run on the CPU agree with the float64 references, and a CPU job of each runs
end to end (liger itself needs a CUDA GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kirunner import protocol, run_job
from kirunner.check import run_check
from kirunner.kernels import get_spec
from kirunner.workload import WorkloadError
from runs.sources.parsers import parse_liger_csv
from tests.kirunner.jobs import make_job

CSV = Path(__file__).resolve().parents[2] / "data" / "liger-ci" / "ab7fe2a" / "benchmark.csv"
GPU = "NVIDIA H100 80GB HBM3"

# Rows per kernel at ab7fe2a, and the first row's parameters as runs.sources.parsers
# normalises them.
ROWS = {"embedding": 192, "tiled_geglu": 120, "tiled_swiglu": 120,
        "fused_add_rms_norm": 72, "poly_norm": 48, "qwen2vl_mrope": 64,
        "mhc_coeffs": 40, "mhc_pre": 40, "mhc_post_res": 40}  # fmt: skip
MHC = {"batch": 4, "HC": 4, "C": 4096, "tmax": 20, "rms_eps": 1e-06, "pre_eps": 0,
       "sinkhorn_eps": 1e-06, "post_mult": 2}  # fmt: skip
TILED = {"batch": 2, "hidden": 2048, "intermediate": 4096, "num_shards": 4, "dtype": "bf16"}
UPSTREAM = {
    "embedding": {"batch": 32, "seq": 512, "D": 768, "dtype": "fp32", "V": 1024},
    "tiled_geglu": {**TILED, "hidden_act": "gelu_pytorch_tanh", "activation_type": "geglu",
                    "seq": 1024},
    "tiled_swiglu": {**TILED, "hidden_act": "silu", "activation_type": "swiglu", "seq": 1024},
    "fused_add_rms_norm": {"M": 2048, "dtype": "fp32", "eps": 1e-06, "hidden": 1024},
    "poly_norm": {"M": 2048, "dtype": "bf16", "eps": 1e-06, "hidden": 1024},
    "qwen2vl_mrope": {"dtype": "bf16", "seq": 2048, "q_heads": 32, "kv_heads": 8, "hidden": 512},
    **{f"mhc_{sub}": {**MHC, "sub_kernel": sub, "seq": 128} for sub in ("coeffs", "pre", "post_res")},
}  # fmt: skip
PROVIDERS = {
    "embedding": {"liger", "huggingface", "torch_compile"},
    "tiled_geglu": {"huggingface", "liger", "liger_tiled", "deepspeed_tiled"},
    "tiled_swiglu": {"huggingface", "liger", "liger_tiled", "deepspeed_tiled"},
    "fused_add_rms_norm": {"liger_fused_add_rms_norm", "huggingface", "liger_rms_norm"},
    "poly_norm": {"liger", "huggingface"},
    "qwen2vl_mrope": {"liger", "huggingface"},
    **dict.fromkeys(("mhc_coeffs", "mhc_pre", "mhc_post_res"), {"liger", "torch"}),
}
REP = {"embedding": 100, "tiled_geglu": 10, "tiled_swiglu": 10, "fused_add_rms_norm": 500,
       "poly_norm": 500, "qwen2vl_mrope": 400,
       "mhc_coeffs": 100, "mhc_pre": 100, "mhc_post_res": 100}  # fmt: skip
# The providers that run without liger (on the CPU).
CPU_PROVIDERS = {
    "embedding": ("huggingface", "torch_compile"),
    "tiled_geglu": ("huggingface", "deepspeed_tiled"),
    "tiled_swiglu": ("huggingface", "deepspeed_tiled"),
    "fused_add_rms_norm": ("huggingface",),
    "poly_norm": ("huggingface",),
    "qwen2vl_mrope": ("huggingface",),
    **dict.fromkeys(("mhc_coeffs", "mhc_pre", "mhc_post_res"), ("torch",)),
}


@pytest.fixture(scope="module")
def h100_rows():
    rows = parse_liger_csv(CSV.read_bytes(), str(CSV))
    return [r for r in rows if r.gpu_name == GPU and r.benchmark in ROWS]


def test_every_h100_row_resolves_with_no_parameter_left_over(h100_rows):
    counted = dict.fromkeys(ROWS, 0)
    first = {}
    for row in h100_rows:
        spec = get_spec(row.benchmark)
        assert row.provider in spec.providers, (row.benchmark, row.provider)
        wl, unused = spec.resolve(row.params)
        assert unused == {}, (row.benchmark, unused)
        counted[row.benchmark] += 1
        first.setdefault(row.benchmark, row.params)
    assert counted == ROWS
    assert first == UPSTREAM


def test_a_row_resolves_to_the_scripts_workload(h100_rows):
    big = next(r for r in h100_rows if r.benchmark == "embedding" and r.params["V"] == 131072
               and r.params["D"] == 4096)  # fmt: skip
    wl, _ = get_spec("embedding").resolve(big.params)
    assert wl == {"V": 131072, "batch": 8, "seq": 2048, "D": 4096, "dtype": "fp32"}
    tiled = next(r for r in h100_rows if r.benchmark == "tiled_swiglu" and r.params["seq"] == 16384)
    wl, _ = get_spec("tiled_swiglu").resolve(tiled.params)
    x = get_spec("tiled_swiglu").make_inputs(wl, "meta", None)["x"]
    assert tuple(x.shape) == (2, 16384, 2048) and x.dtype == torch.bfloat16
    norm = next(r for r in h100_rows if r.benchmark == "fused_add_rms_norm"
                and r.params["hidden"] == 32768)  # fmt: skip
    wl, _ = get_spec("fused_add_rms_norm").resolve(norm.params)
    assert wl == {"M": 2048, "hidden": 32768, "eps": 1e-6, "dtype": "fp32"}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_rep_and_providers_are_the_scripts(name):
    spec = get_spec(name)
    assert spec.upstream_rep == REP[name]
    assert set(spec.providers) == PROVIDERS[name]


def test_tiled_activation_type_must_match_the_kernel_name():
    with pytest.raises(WorkloadError, match="activation_type"):
        get_spec("tiled_geglu").resolve(UPSTREAM["tiled_swiglu"])


def test_shapes_follow_the_scripts():
    gen = torch.Generator().manual_seed(0)
    ids = get_spec("embedding").make_inputs(UPSTREAM["embedding"], "cpu", gen)["ids"]
    assert tuple(ids.shape) == (32, 512) and ids.dtype == torch.int64 and int(ids.max()) < 1024
    xr = get_spec("fused_add_rms_norm").make_inputs(UPSTREAM["fused_add_rms_norm"], "cpu", gen)
    assert {n: tuple(t.shape) for n, t in xr.items()} == {"x": (2048, 1024), "r": (2048, 1024)}
    x = get_spec("poly_norm").make_inputs(UPSTREAM["poly_norm"], "cpu", gen)["x"]
    assert tuple(x.shape) == (2048, 1024) and x.dtype == torch.bfloat16


def _cases():
    return [(name, p) for name in sorted(ROWS) for p in CPU_PROVIDERS[name]]


@pytest.mark.parametrize("name,provider", _cases())
def test_cpu_providers_match_the_float64_reference(name, provider):
    spec = get_spec(name)
    wl = spec.scale_down(spec.resolve(UPSTREAM[name])[0])
    impl = spec.build(wl, provider, torch.device("cpu"), "0.7.0")
    check = run_check(spec, impl, wl, torch.device("cpu"), "full", seed=7)
    assert check.passed, check.checks
    names = {c["name"] for c in check.checks}
    if impl.module is None or not list(impl.module.parameters()):  # a function
        assert names == {*spec.outputs, *(f"grad_{n}" for n in spec.inputs)}
        return
    params = {f"grad_{n}" for n, _ in impl.module.named_parameters()}
    assert params and params <= names  # every weight's gradient is checked


@pytest.mark.parametrize("sweep", [{"hidden": 512}, {"seq": 16384, "hidden": 8192}])
def test_qwen2vl_mrope_workload_and_sections_as_the_script(sweep):
    from kirunner.families.qwen2vl_mrope import mrope_section

    wl, _ = get_spec("qwen2vl_mrope").resolve({**UPSTREAM["qwen2vl_mrope"], **sweep})
    head_dim = wl["hidden"] // wl["q_heads"]
    assert mrope_section(head_dim) == ([2, 3, 3] if head_dim == 16 else [32, 48, 48])
    leaves = get_spec("qwen2vl_mrope").make_inputs(wl, "meta", None)
    views = get_spec("qwen2vl_mrope").views(leaves)
    assert tuple(views["q"].shape) == (1, 32, wl["seq"], head_dim)
    assert tuple(views["k"].shape) == (1, 8, wl["seq"], head_dim)
    assert not views["q"].is_contiguous()  # the transpose view, as upstream


def test_qwen2vl_mrope_cos_sin_interleave_as_transformers_5_does():
    """transformers 4.57's rotary embedding and section interleave (re-implemented, the
    script's) give exactly the cos/sin that transformers 5 computes with both folded in."""
    from transformers.models.qwen2_vl import modeling_qwen2_vl as hf
    from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig

    from kirunner.families.qwen2vl_mrope import mrope_section, rotary_cos_sin

    seq, head_dim = 64, 64
    section = mrope_section(head_dim)
    config = Qwen2VLTextConfig(hidden_size=32 * head_dim, num_attention_heads=32,
                               num_key_value_heads=8, rope_parameters={
                                   "rope_type": "default", "rope_theta": 1e6,
                                   "mrope_section": section})  # fmt: skip
    pos = torch.arange(seq * 3).view(3, 1, -1)
    cos5, sin5 = hf.Qwen2VLRotaryEmbedding(config)(torch.empty((), dtype=torch.float32), pos)
    cos4, sin4 = rotary_cos_sin(seq, head_dim, torch.float32, "cpu")

    def interleave(t):
        return torch.cat([m[i % 3] for i, m in enumerate(t.split(section * 2, dim=-1))], dim=-1)

    assert torch.equal(interleave(cos4), cos5) and torch.equal(interleave(sin4), sin5)


def test_qwen2vl_mrope_huggingface_matches_float64_in_float32():
    spec = get_spec("qwen2vl_mrope")
    wl = spec.scale_down(spec.resolve({**UPSTREAM["qwen2vl_mrope"], "dtype": "fp32"})[0])
    impl = spec.build(wl, "huggingface", torch.device("cpu"), "0.7.0")
    check = run_check(spec, impl, wl, torch.device("cpu"), "full", seed=5)
    assert check.passed and check.checks[0]["atol"] == 1e-4, check.checks


def test_deepspeed_tiled_weight_gradients_are_the_ones_its_backward_accumulates():
    spec = get_spec("tiled_geglu")
    wl = spec.scale_down(spec.resolve(UPSTREAM["tiled_geglu"])[0])
    impl = spec.build(wl, "deepspeed_tiled", torch.device("cpu"), "0.7.0")
    assert wl["num_shards"] == 4 and wl["seq"] % 4 == 0
    check = run_check(spec, impl, wl, torch.device("cpu"), "backward", seed=3)
    weights = [c for c in check.checks if c["name"].startswith("grad_mlp.")]
    assert len(weights) == 3 and all(c["passed"] for c in weights), weights
    assert all(p.grad is None for p in impl.module.parameters())


def test_fused_add_rms_norm_naive_returns_the_residual_sum():
    spec = get_spec("fused_add_rms_norm")
    wl = spec.scale_down(spec.resolve(UPSTREAM["fused_add_rms_norm"])[0])
    impl = spec.build(wl, "huggingface", torch.device("cpu"), "0.7.0")
    v = spec.make_inputs(wl, "cpu", torch.Generator().manual_seed(0))
    y, s = impl.forward(v)
    assert torch.equal(s, v["x"] + v["r"]) and y.shape == s.shape


def _backward_spy(monkeypatch) -> list:
    """(which backward, retain_graph) per call: Tensor.backward or torch.autograd.backward
    called directly (Tensor.backward's own call into the latter is not counted again)."""
    calls: list = []
    inside: list = []
    tensor_backward, autograd_backward = torch.Tensor.backward, torch.autograd.backward

    def spy(self, gradient=None, retain_graph=None, **kw):
        calls.append(("tensor", retain_graph))
        inside.append(True)
        try:
            return tensor_backward(self, gradient, retain_graph=retain_graph, **kw)
        finally:
            inside.pop()

    def spy_autograd(tensors, grad_tensors=None, retain_graph=None, *args, **kw):
        if not inside:
            calls.append(("autograd", retain_graph))
        return autograd_backward(tensors, grad_tensors, retain_graph, *args, **kw)

    monkeypatch.setattr(torch.Tensor, "backward", spy)
    monkeypatch.setattr(torch.autograd, "backward", spy_autograd)
    return calls


def _closure(name, provider, mode, *, memory=False):
    spec = get_spec(name)
    wl = spec.scale_down(spec.resolve(UPSTREAM[name])[0])
    impl = spec.build(wl, provider, torch.device("cpu"), "0.7.0")
    gen = torch.Generator().manual_seed(0)
    if memory:
        return protocol.memory_closure(spec, impl, wl, "cpu", gen, mode), None
    return protocol.speed_closure(spec, impl, wl, "cpu", gen, mode)


# (kernel, pass, memory) -> (backward calls of two timed calls, what grad_to_none holds)
CLOSURES = {
    ("embedding", "forward", False): ([], None),
    ("embedding", "backward", False): ([("tensor", True)] * 2, "ids"),
    ("embedding", "full", False): ([("tensor", None)] * 2, None),
    ("embedding", "forward", True): ([("tensor", None)] * 2, None),  # memory: always full
    ("fused_add_rms_norm", "backward", False): ([("autograd", True)] * 2, "x,r"),
    ("fused_add_rms_norm", "full", False): ([("autograd", None)] * 2, "x,r"),
    ("fused_add_rms_norm", "backward", True): ([("autograd", None)] * 2, None),
    ("poly_norm", "full", False): ([("tensor", True)] * 2, "x"),
    ("poly_norm", "forward", True): ([("tensor", True)] * 2, None),
    ("tiled_swiglu", "forward", False): ([], "x"),
    ("tiled_swiglu", "full", False): ([("tensor", True)] * 2, "x"),
    ("tiled_swiglu", "forward", True): ([], None),  # memory reads the pass
    ("tiled_swiglu", "backward", True): ([("tensor", True)] * 2, None),
}


@pytest.mark.parametrize("name,mode,memory", sorted(CLOSURES))
def test_closures_as_upstream(monkeypatch, name, mode, memory):
    fn, g2n = _closure(name, "huggingface", mode, memory=memory)
    calls = _backward_spy(monkeypatch)
    fn()
    fn()
    want_calls, resets = CLOSURES[(name, mode, memory)]
    assert calls == want_calls
    if not memory:
        if resets is None:
            assert g2n is None
        else:
            assert len(g2n) == len(resets.split(","))
            assert all(t.dtype == (torch.int64 if resets == "ids" else g2n[0].dtype) for t in g2n)


def test_embedding_builds_both_tables_as_the_script():
    spec = get_spec("embedding")
    wl = spec.scale_down(spec.resolve(UPSTREAM["embedding"])[0])
    impl = spec.build(wl, "torch_compile", torch.device("cpu"), "0.7.0")
    assert type(impl.module) is torch.nn.Embedding  # the script's module, no subclass
    assert any("LigerEmbedding companion" in n for n in impl.info.notes)  # no liger on the CPU


@pytest.mark.parametrize("name", sorted(ROWS))
@pytest.mark.parametrize("pass_", ["forward", "backward", "full"])
@pytest.mark.parametrize("metric", ["latency", "memory"])
def test_cpu_job_runs(name, pass_, metric):
    provider = CPU_PROVIDERS[name][0]
    job = make_job(name, provider=provider, pass_=pass_, metric=metric,
                   parameters=UPSTREAM[name], rep=5, revision="0.7.0")  # fmt: skip
    payload = run_job(job, seed=1, force_cpu=True)["payload"]
    assert payload["status"] == "ok", payload["error"]
    assert payload["correctness"]["passed"]
    assert payload["workload"]["resolved"] == get_spec(name).resolve(UPSTREAM[name])[0]
    assert payload["workload"]["scaledDown"]


@pytest.mark.parametrize("name", sorted(ROWS))
def test_liger_is_unavailable_on_the_cpu(name):
    provider = sorted(PROVIDERS[name] - set(CPU_PROVIDERS[name]))[0]
    job = make_job(name, provider=provider, parameters=UPSTREAM[name])
    assert run_job(job, force_cpu=True)["payload"]["status"] == "unavailable"


# (kernel, pass) -> what grad_to_none holds (None: no grad_to_none)
MHC_RESETS = {
    ("mhc_coeffs", "backward"): {"x", "phi", "b", "alpha_pre", "alpha_post", "alpha_res"},
    ("mhc_pre", "full"): {"x", "h_pre"},
    ("mhc_post_res", "backward"): {"x", "f_out", "h_post", "h_res"},
}


@pytest.mark.parametrize("name,mode", sorted(MHC_RESETS))
def test_mhc_closures_as_upstream(monkeypatch, name, mode):
    spec = get_spec(name)
    wl = spec.scale_down(spec.resolve(UPSTREAM[name])[0])
    impl = spec.build(wl, "torch", torch.device("cpu"), "0.7.0")
    gen = torch.Generator().manual_seed(0)
    fn, g2n = protocol.speed_closure(spec, impl, wl, "cpu", gen, mode)
    calls = _backward_spy(monkeypatch)
    fn()
    fn()
    assert calls == [("tensor", True if mode == "backward" else None)] * 2
    named = {id(t): n for n, t in (impl.module.named_parameters() if impl.module else [])}
    leaves = spec.make_inputs(wl, "cpu", torch.Generator().manual_seed(0))
    assert len(g2n) == len(MHC_RESETS[(name, mode)])
    assert {named.get(id(t)) for t in g2n} - {None} == MHC_RESETS[(name, mode)] - set(leaves)


@pytest.mark.parametrize("name", ["mhc_coeffs", "mhc_pre", "mhc_post_res"])
def test_mhc_forward_runs_without_grad_as_the_script(name):
    spec = get_spec(name)
    wl = spec.scale_down(spec.resolve(UPSTREAM[name])[0])
    impl = spec.build(wl, "torch", torch.device("cpu"), "0.7.0")
    fn, g2n = protocol.speed_closure(spec, impl, wl, "cpu", torch.Generator(), "forward")
    outs = fn()
    assert g2n is None and all(o.grad_fn is None for o in outs)


def test_mhc_coefficients_and_inputs_as_the_script():
    wl, _ = get_spec("mhc_post_res").resolve({**UPSTREAM["mhc_post_res"], "seq": 2048})
    leaves = get_spec("mhc_post_res").make_inputs(wl, "meta", None)
    assert tuple(leaves["x"].shape) == (4, 2048, 4, 4096) and leaves["x"].dtype == torch.bfloat16
    assert tuple(leaves["f_out"].shape) == (4, 2048, 4096)
    small = get_spec("mhc_post_res").scale_down(wl)
    impl = get_spec("mhc_post_res").build(small, "torch", torch.device("cpu"), "0.7.0")
    h_res = impl.module.h_res.detach()
    assert tuple(h_res.shape) == (2, small["seq"], 4, 4) and h_res.dtype == torch.float32
    # Sinkhorn's 20 iterations: a (nearly) doubly stochastic matrix per token.
    assert torch.allclose(h_res.sum(-2), torch.ones(()), atol=1e-3)
    coeffs = get_spec("mhc_coeffs").make_inputs(get_spec("mhc_coeffs").scale_down(wl | {
        "sub_kernel": "coeffs"}), "cpu", torch.Generator().manual_seed(0))  # fmt: skip
    assert coeffs["phi"].dtype == torch.bfloat16 and float(coeffs["phi"].float().std()) < 0.03
    assert coeffs["b"].dtype == torch.float32 and float(coeffs["alpha_res"]) == 1.0


# -- fused_linear_cross_entropy and cross_entropy at ab7fe2a --------------------------------
def test_flce_and_cross_entropy_rows_resolve_with_their_new_provider_and_pass(h100_rows):
    from kirunner.runner import validate_job

    rows = parse_liger_csv(CSV.read_bytes(), str(CSV))
    seen = {}
    for row in rows:
        if row.benchmark not in ("fused_linear_cross_entropy", "cross_entropy"):
            continue
        spec = get_spec(row.benchmark)
        assert row.provider in spec.providers
        spec.resolve(row.params)
        job = make_job(row.benchmark, provider=row.provider, pass_=row.timed_pass,
                       metric=row.metric, parameters=row.params, revision="0.7.0")  # fmt: skip
        assert validate_job(job)["pass"] == row.timed_pass
        key = (row.benchmark, row.timed_pass)
        seen[key] = seen.get(key, 0) + 1
    assert seen[("fused_linear_cross_entropy", "no-grad-forward")] == 12
    assert seen[("cross_entropy", "no-grad-forward")] == 12
    assert sum(seen.values()) == 120


def test_flce_builds_one_head_from_0_6_2_and_two_before():
    from kirunner.families.fused_linear_cross_entropy import one_head

    assert not one_head("0.6.0") and not one_head("0.6.1") and not one_head(None)
    assert one_head("0.6.2") and one_head("0.7.0")
    spec = get_spec("fused_linear_cross_entropy")
    wl = spec.scale_down(spec.resolve({"bt": 4096, "hidden": 4096, "V": 128256,
                                       "dtype": "bf16"})[0])  # fmt: skip
    assert spec.build(wl, "huggingface", torch.device("cpu"), "0.7.0").other_head is None
    assert spec.build(wl, "huggingface", torch.device("cpu"), "0.6.0").other_head is not None
    with pytest.raises(WorkloadError, match="0.6.2"):
        spec.build(wl, "liger_fp32_accum", torch.device("cpu"), "0.6.0")


def test_no_grad_forward_is_timed_under_no_grad(monkeypatch):
    from kirunner import harness

    seen = []
    original = harness.latency_cpu

    def spy(fn, **kw):
        seen.append(torch.is_grad_enabled())
        return original(fn, **kw)

    monkeypatch.setattr(harness, "latency_cpu", spy)
    params = {"batch": 8, "seq": 2048, "vocab": 4096}
    for pass_ in ("no-grad-forward", "forward"):
        job = make_job("cross_entropy", pass_=pass_, parameters=params, rep=5, revision="0.7.0")
        payload = run_job(job, seed=1, force_cpu=True)["payload"]
        assert payload["status"] == "ok", payload["error"]
        assert [c["name"] for c in payload["correctness"]["checks"]] == ["loss"]
    assert seen == [False, True]
    fn, g2n = _closure("embedding", "huggingface", "no-grad-forward")
    assert g2n is None


def _h100_issuer():
    """bench/h100/issue_jobs.py, a script rather than a package module."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "bench" / "h100" / "issue_jobs.py"
    module_spec = importlib.util.spec_from_file_location("h100_issue_jobs", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def test_the_h100_issuer_issues_every_row_of_the_new_kernels_and_the_runner_accepts_each(db):
    import secrets
    import uuid
    from datetime import UTC, datetime

    from kirunner.runner import validate_job
    from reruns.controlled import job_document
    from reruns.models import RerunJob
    from runs.sources.pipeline import ingest

    ingest(source_slug="liger-kernel-ci", locations=[str(CSV.parent)])
    wanted = {**ROWS, "fused_linear_cross_entropy": 60, "cross_entropy": 60}
    issued = dict.fromkeys(wanted, 0)
    for run in _h100_issuer().selected("ab7fe2a", set(wanted)):
        job = RerunJob(run=run, gpu_class="h100", nonce=secrets.token_hex(16),
                       uuid=uuid.uuid4(), issued_at=datetime.now(UTC))  # fmt: skip
        checked = validate_job(job_document(job))
        spec = get_spec(checked["benchmark"])
        assert checked["provider"] in spec.providers
        wl, unused = spec.resolve(checked["parameters"])
        assert set(unused) <= {"mode"}  # fused_linear_cross_entropy's unread config key
        issued[run.benchmark.slug] += 1
    assert issued == wanted


# -- dyt: benchmark_dyt.py refactored after 0.7.0 (c2f4c020), in the ab7fe2a rows ----------
DYT = {"bt": 4096, "dtype": "bf16", "beta": False, "hidden": 1024}


def test_dyt_at_ab7fe2a_times_as_run_speed_benchmark(monkeypatch):
    from kirunner.building import at_commit

    spec = get_spec("dyt_beta=False")
    wl = spec.scale_down(spec.resolve(DYT)[0])
    with at_commit("ab7fe2a"):
        assert spec.recipe(False) == spec.recipe(True) == "random_dy"
        impl = spec.build(wl, "torch", torch.device("cpu"), "0.7.0")
        fn, g2n = protocol.speed_closure(spec, impl, wl, "cpu", torch.Generator(), "full")
        calls = _backward_spy(monkeypatch)
        fn()
        fn()
    assert calls == [("tensor", True)] * 2 and len(g2n) == 1  # keeps the graph, as utils.py
    assert any("c2f4c020" in n for n in impl.info.notes)
    with at_commit("02bac05"):
        assert spec.recipe(False) == "fixed_dy_release"
    assert spec.recipe(False) == "fixed_dy_release"  # no commit: the script the spec mirrored


def test_dyt_at_ab7fe2a_draws_dy_like_y_and_times_with_rep_10(monkeypatch):
    """run_speed_benchmark draws randn_like(y), and y is float32 (the parameters are): a dy of
    x's bfloat16 cost a cast per call (the runner read 1.12-1.13 of the script's backward);
    and its rep is 10, not the 500 of the script before c2f4c020."""
    from kirunner.building import at_commit
    from kirunner.runner import _rep

    spec = get_spec("dyt_beta=False")
    wl = spec.scale_down(spec.resolve(DYT)[0])
    grads: list = []
    tensor_backward = torch.Tensor.backward

    def spy(self, gradient=None, *args, **kw):
        grads.append((self.dtype, gradient.dtype))
        return tensor_backward(self, gradient, *args, **kw)

    with at_commit("ab7fe2a"):
        impl = spec.build(wl, "torch", torch.device("cpu"), "0.7.0")
        fn, _ = protocol.speed_closure(spec, impl, wl, "cpu", torch.Generator(), "backward")
        monkeypatch.setattr(torch.Tensor, "backward", spy)
        fn()
        assert _rep(spec, {"rep": None}, None) == (10.0, "upstream")
    assert grads == [(torch.float32, torch.float32)]
    with at_commit("02bac05"):
        assert _rep(spec, {"rep": None}, None) == (500.0, "upstream")


def test_a_ci_job_hands_its_commit_to_the_families():
    params = {**DYT, "beta": False}
    job = make_job("dyt_beta=False", provider="torch", pass_="full", parameters=params, rep=5,
                   revision="ab7fe2a")  # fmt: skip
    job["protocol"]["ligerVersion"] = "0.7.0"
    payload = run_job(job, seed=1, force_cpu=True)["payload"]
    assert payload["status"] == "ok", payload["error"]
    assert any("c2f4c020" in n for n in payload["implementation"]["notes"])
    job["implementation"]["revision"] = "0.7.0"
    payload = run_job(job, seed=1, force_cpu=True)["payload"]
    assert not any("c2f4c020" in n for n in payload["implementation"]["notes"])


def test_a_torch_row_of_a_ci_commit_measures_as_that_commits_script():
    # A torch row names no Liger revision: before the job sent protocol.upstreamCommit, every
    # torch and torch_compile DyT job of ab7fe2a ran as 02bac05's script (rep 500, dy like x).
    params = {**DYT, "beta": True}
    job = make_job("dyt_beta=True", provider="torch", pass_="backward", parameters=params,
                   rep=None, revision="0.7.0")  # fmt: skip
    job["implementation"] = {"project": "pytorch", "revision": None}
    before = run_job(job, seed=1, force_cpu=True)["payload"]
    job["protocol"]["upstreamCommit"] = "ab7fe2a"
    after = run_job(job, seed=1, force_cpu=True)["payload"]
    assert before["status"] == after["status"] == "ok", (before["error"], after["error"])
    assert not any("c2f4c020" in n for n in before["implementation"]["notes"])
    assert any("c2f4c020" in n for n in after["implementation"]["notes"])
    assert after["implementation"]["upstreamCommit"] == "ab7fe2a"


@pytest.mark.parametrize("bad", ["", "main", "AB7FE2A", 7, "ab7fe2a; rm -rf /"])
def test_an_upstream_commit_that_is_no_commit_id_is_refused(bad):
    job = make_job("dyt_beta=True", provider="torch", parameters={**DYT, "beta": True})
    job["protocol"]["upstreamCommit"] = bad
    payload = run_job(job, seed=1, force_cpu=True)["payload"]
    assert payload["status"] == "invalid"
    assert "protocol.upstreamCommit" in payload["error"]


# -- cpo, simpo, dpo: modules built once from 0.6.1 (1ea9175a), as at ab7fe2a --------------
PREF = {"seq": 1024, "hidden": 4096, "V": 128256, "dtype": "bf16", "batch": 4}
DPO = {**PREF, "bias": True, "beta": 0.1, "ignore_index": 42}


@pytest.mark.parametrize("name,params", [("fused_linear_cpo_loss", PREF),
                                         ("fused_linear_simpo_loss", PREF),
                                         ("dpo_loss", DPO)])  # fmt: skip
def test_preference_modules_are_built_once_from_0_6_1(name, params):
    from kirunner.families.preference import OnceHead, PerCallHead, built_once

    assert not built_once("0.6.0") and built_once("0.6.1") and built_once("0.7.0")
    spec = get_spec(name)
    wl = spec.scale_down(spec.resolve(params)[0])
    once = spec.build(wl, "huggingface", torch.device("cpu"), "0.7.0")
    assert isinstance(once.module, OnceHead) and once.module.other is not None
    assert once.module.take() is once.module.take()  # the same module in every call
    assert any("built once" in n for n in once.info.notes)
    assert isinstance(spec.build(wl, "huggingface", torch.device("cpu"), "0.6.0").module,
                      PerCallHead)  # fmt: skip
    check = run_check(spec, once, wl, torch.device("cpu"), "full", seed=2)
    assert check.passed, check.checks
    # A memory job's warm-up clears the live module's gradients through parameters() (at
    # ab7fe2a on the H100 every dpo_loss memory job failed on a head without it).
    held = list(once.module.parameters())
    assert held
    assert {id(p) for p in held} == {id(p) for p in once.module.module.parameters()}
    per_call = spec.build(wl, "huggingface", torch.device("cpu"), "0.6.0").module
    assert list(per_call.parameters()) == []


@pytest.mark.parametrize("name", ["mhc_pre", "mhc_post_res"])
def test_mhc_memory_holds_the_outputs_through_backward_as_the_script(name):
    """bench_memory_mhc's full(): `out = ...; out.square().mean().backward()`, the output a
    local until backward returns. The runner freed it mid-backward and read one float32
    [B, T, C] below the script for mhc_pre torch on the H100 (128 MiB at seq 1,024)."""
    from kirunner import harness

    spec = get_spec(name)
    wl = spec.scale_down(spec.resolve(UPSTREAM[name])[0])
    impl = spec.build(wl, "torch", torch.device("cpu"), "0.7.0")
    case = protocol._Case(spec, impl, wl, "cpu", torch.Generator().manual_seed(0), True)
    runner, _ = protocol._STYLES[spec.recipe(True)](case, "full", for_memory=True)

    def script():
        (out,) = case.forward()
        out.square().mean().backward()

    params = list(impl.module.parameters()) if impl.module is not None else []
    peaks = {"first": [], "script": [], "runner": []}
    # The first profiled measurement reads lower; then script and runner in turns.
    for who in ("first", "script", "runner", "runner", "script"):
        for t in [*case.leaves.values(), *params]:
            t.grad = None  # each measurement from the same state
        fn = runner if who == "runner" else script
        peaks[who].append(harness.memory_cpu(lambda fn=fn: fn, quantiles=[0.5]).quantiles[0])
    out_mib = wl["B"] * wl["seq"] * wl["C"] * 4 / 2**20  # the float32 [B, T, C] at stake
    apart = abs(sum(peaks["runner"]) - sum(peaks["script"])) / 2
    assert apart < out_mib / 4, (peaks, out_mib)


def test_mhc_pre_memory_counts_the_workspaces_of_the_cells_before_it(monkeypatch):
    """benchmark_mhc.py measures pre after the coeffs cells in one process: the torch
    provider's matmuls made the cuBLAS workspaces of the forward's and the autograd engine's
    threads, in every pre figure. pre itself runs no matmul, and the runner read 64.0-64.5
    MiB below the script on every mhc_pre memory cell of the H100 until its warm-up made them
    (coeffs and post_res make their own)."""
    from kirunner import runner

    assert [get_spec(f"mhc_{s}").earlier_matmuls for s in ("coeffs", "pre", "post_res")] == [
        False,
        True,
        False,
    ]
    assert not any(
        get_spec(n).earlier_matmuls for n in ("geglu", "dyt_beta=True", "distill_jsd_loss")
    )
    seen = []
    monkeypatch.setattr(torch.Tensor, "backward", lambda t, *a, **k: seen.append(t.shape))
    runner._make_matmul_workspaces(torch.device("cpu"))
    assert seen == [torch.Size([])]  # a matmul's loss, so both threads multiply

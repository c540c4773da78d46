"""fused_linear_cross_entropy, fused_linear_cpo_loss/fused_linear_simpo_loss and
dpo_loss/kto_loss (kirunner/families/fused_linear_cross_entropy.py, preference.py,
preference_ref.py): the H200 rows of Liger-Kernel 02bac05 resolve and are issued, the inputs,
per-call modules and closures are built as the scripts build them, the huggingface baselines
agree with the float64 references in bf16 and fp32, and a CPU job of each runs end to end."""

from __future__ import annotations

import pytest
import torch

# kernels first: it imports the family modules, which import it back.
from kirunner import kernels, protocol, run_job
from kirunner.check import run_check
from kirunner.families.preference import hf_alignment_loss, hf_cpo_sigmoid, reference_cpo
from kirunner.families.preference_ref import hf_dpo, hf_kto
from kirunner.workload import WorkloadError
from runs.sources.parsers import parse_liger_csv
from tests.kirunner.issued import issued_documents
from tests.kirunner.jobs import make_job
from tests.kirunner.test_family_losses import CSV, _backward_calls

get_spec = kernels.get_spec
CPU = torch.device("cpu")

FLCE = {"hidden": 4096, "V": 128256, "mode": "forward", "dtype": "bf16", "bt": 4096}
PAIRED = {"seq": 1024, "hidden": 4096, "V": 128256, "mode": "forward", "dtype": "bf16",
          "batch": 2}  # fmt: skip
WITH_REF = {"seq": 512, "hidden": 1024, "V": 128256, "mode": "forward", "dtype": "bf16",
            "bias": True, "beta": 0.1, "ignore_index": 42, "batch": 2}  # fmt: skip
# The first H200 row of each kernel at 02bac05, as runs.sources.parsers normalises it.
UPSTREAM = {
    "fused_linear_cross_entropy": FLCE,
    "fused_linear_cpo_loss": PAIRED,
    "fused_linear_simpo_loss": PAIRED,
    "dpo_loss": WITH_REF,
    "kto_loss": WITH_REF,
}
ROWS = {"fused_linear_cross_entropy": 32, "fused_linear_cpo_loss": 32,
        "fused_linear_simpo_loss": 32, "dpo_loss": 40, "kto_loss": 40}  # fmt: skip
PER_CALL = ("fused_linear_cpo_loss", "fused_linear_simpo_loss", "dpo_loss")
FROZEN = ("dpo_loss", "kto_loss")  # _input drawn without requires_grad


@pytest.fixture(scope="module")
def h200_rows():
    rows = parse_liger_csv(CSV.read_bytes(), str(CSV))
    return [r for r in rows if r.gpu_name == "NVIDIA H200" and r.benchmark in ROWS]


def test_every_h200_row_resolves_with_only_mode_left_over(h200_rows):
    counted = dict.fromkeys(ROWS, 0)
    first = {}
    for row in h200_rows:
        spec = get_spec(row.benchmark)
        assert row.provider in spec.providers
        _, unused = spec.resolve(row.params)
        assert unused == {"mode": "forward"}, (row.benchmark, unused)
        counted[row.benchmark] += 1
        first.setdefault(row.benchmark, row.params)
    assert counted == ROWS
    assert first == UPSTREAM


@pytest.mark.parametrize("name", sorted(ROWS))
def test_rep_providers_and_styles_are_the_scripts(name):
    spec = get_spec(name)
    # ab7fe2a's script (Liger-Kernel 0.6.2 on) adds liger-fp32-accum: test_family_ab7fe2a.py
    extra = {"liger_fp32_accum"} if name == "fused_linear_cross_entropy" else set()
    assert spec.upstream_rep == 100 and set(spec.providers) == {"liger", "huggingface", *extra}
    frozen = name in FROZEN
    assert spec.inputs == (() if frozen else ("x",))
    assert spec.style == ("frozen_input_loss" if frozen else "scalar_loss")
    assert spec.memory_style == spec.style + "_full"


@pytest.mark.parametrize("name", ["fused_linear_cpo_loss", "dpo_loss"])
def test_paired_losses_need_an_even_batch(name):
    with pytest.raises(WorkloadError, match="even"):
        get_spec(name).resolve({**UPSTREAM[name], "batch": 3})


def _small(name, dtype="bf16"):
    spec = get_spec(name)
    return spec, spec.scale_down({**spec.resolve(UPSTREAM[name])[0], "dtype": dtype})


def _raw(name, **sizes):
    spec, wl = _small(name)
    wl = {**wl, **sizes}
    return spec, wl, spec.make_inputs(wl, "cpu", torch.Generator().manual_seed(0))


def test_shapes_follow_the_scripts():
    _, wl, raw = _raw("fused_linear_cross_entropy")
    assert raw["x"].shape == (wl["bt"], wl["hidden"]) and raw["target"].shape == (wl["bt"],)
    for name in ("fused_linear_cpo_loss", "dpo_loss", "kto_loss"):
        _, wl, raw = _raw(name)
        shape = (wl["batch"], wl["seq"], wl["hidden"])
        assert raw["x"].shape == shape and raw["target"].shape == shape[:2]
        assert raw["x"].dtype == torch.bfloat16 and not raw["x"].requires_grad
        if name != "fused_linear_cpo_loss":
            assert raw["ref_x"].shape == shape
            ignored = int((raw["target"] == 42).sum())
            assert 1 <= ignored < raw["target"].numel() // 2 + 1  # randint(1, B*T // 2)
    assert raw["labels"].dtype == torch.bool and raw["labels"].shape == (wl["batch"],)
    assert raw["kl"].shape == (1,) and raw["kl"].dtype == torch.bfloat16


def test_kto_memory_draws_the_reference_bias_the_speed_function_leaves_out():
    spec, wl = _small("kto_loss", "fp32")  # in bf16 the bias can vanish in the rounding
    gen = torch.Generator().manual_seed(0)
    raw = spec.memory_inputs(wl, "cpu", gen)
    bound = wl["hidden"] ** -0.5
    for key in ("ref_bias", "other_ref_bias"):
        assert raw[key].shape == (wl["V"],) and float(raw[key].abs().max()) <= bound
    impl = spec.build(wl, "huggingface", CPU, "0.6.0")
    assert impl.ref_lin.bias is None  # the speed function's reference linear has none
    with_bias = float(impl.forward(raw)[0].detach())
    without = float(impl.forward({k: v for k, v in raw.items() if "bias" not in k})[0].detach())
    assert with_bias != without
    views = {k: (v.double() if v.is_floating_point() else v) for k, v in raw.items()}
    params = {n: p.detach().double() for n, p in impl.module.named_parameters()}
    (want,) = spec.reference(views, params, wl, impl)
    assert with_bias == pytest.approx(float(want), rel=1e-4)


@pytest.mark.parametrize("name", sorted(ROWS))
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_huggingface_baseline_matches_the_float64_reference(name, dtype):
    spec, wl = _small(name, dtype)
    impl = spec.build(wl, "huggingface", CPU, "0.6.0")
    for seed in (3, 4):
        check = run_check(spec, impl, wl, CPU, "full", seed)
        assert check.passed, check.checks
    names = [c["name"] for c in check.checks]
    weights = ["grad_lin.weight"] + (["grad_lin.bias"] if name in FROZEN else [])
    assert names == ["loss", *([] if name in FROZEN else ["grad_x"]), *weights]


def _float64(raw):
    return {k: (v.double() if v.is_floating_point() else v) for k, v in raw.items()}


def test_references_are_the_baselines_computed_in_float64():
    # The baseline re-implementation run on float64 tensors is an independent route to each
    # loss (its `.float()` rounds the policy logits to float32, hence rel 1e-6).
    for name in ("fused_linear_cpo_loss", "dpo_loss", "kto_loss"):
        spec, wl, raw = _raw(name)
        v = _float64(raw)
        impl = spec.build(wl, "huggingface", CPU, "0.6.0")
        params = {n: p.detach().double() for n, p in impl.module.named_parameters()}
        w, b = params["lin.weight"], params.get("lin.bias")
        if name == "fused_linear_cpo_loss":
            want = hf_alignment_loss(w, v["x"], v["target"], None, hf_cpo_sigmoid,
                                     ignore_index=-100, average=False)[0]  # fmt: skip
        else:
            ref_lin = impl.module.checked.ref_lin if name == "dpo_loss" else impl.ref_lin
            ref = (v["ref_x"], ref_lin.weight.detach().double(), None)
            extra = (
                {"unpaired": True, "labels": v["labels"], "kl": v["kl"]}
                if name == "kto_loss"
                else {}
            )
            alignment = hf_dpo if name == "dpo_loss" else hf_kto
            want = hf_alignment_loss(w, v["x"], v["target"], b, alignment, ignore_index=42,
                                     compute_nll=False, ref=ref, beta=0.1, **extra)[0]  # fmt: skip
        (got,) = spec.reference(v, params, wl, impl)
        assert float(got) == pytest.approx(float(want), rel=1e-6)


def test_simpo_and_cpo_lines_compute_different_losses():
    # The SimPO script times HF's CPO (sum, no margin) against liger's SimPO (mean, gamma 0.5).
    spec, wl, raw = _raw("fused_linear_simpo_loss")
    v = _float64(raw)
    # A fixed draw: the two losses' difference depends on the weights (0.049 in one CI run).
    generator = torch.Generator().manual_seed(0)
    w = torch.randn(wl["V"], wl["hidden"], dtype=torch.float64, generator=generator)
    w = w * wl["hidden"] ** -0.5
    cpo = reference_cpo(v["x"], w, v["target"], average=False, gamma=0.0)
    simpo = reference_cpo(v["x"], w, v["target"], average=True, gamma=0.5)
    half = wl["batch"] // 2
    logits = (v["x"] @ w.t()).log_softmax(-1)
    logps = logits.gather(-1, v["target"].unsqueeze(-1)).squeeze(-1).mean(-1)
    nll = -logits[:half].gather(-1, v["target"][:half].unsqueeze(-1)).mean()
    margin = 0.1 * (logps[:half] - logps[half:]) - 0.5
    assert float(simpo) == pytest.approx(float(nll - torch.nn.functional.logsigmoid(margin).mean()))
    assert abs(float(cpo) - float(simpo)) > 0.05
    impl = spec.build(wl, "huggingface", CPU, "0.6.0")
    assert (impl.average, impl.gamma) == (False, 0.0)  # the torch line is CPO's


@pytest.mark.parametrize("name", PER_CALL)
def test_the_module_is_built_in_every_call_and_the_check_sees_its_weights(name):
    spec, wl = _small(name)
    impl = spec.build(wl, "huggingface", CPU, "0.6.0")
    head = impl.module
    built = []
    factory = head.factory
    head.factory = lambda: built.append(factory()) or built[-1]
    raw = spec.make_inputs(wl, "cpu", torch.Generator().manual_seed(0))
    params = dict(head.named_parameters())  # what the check reads, before its call
    assert len(built) == 1 and params["lin.weight"] is built[0].lin.weight
    impl.forward(raw)
    assert len(built) == 1  # the checked call took the module the check read
    impl.forward(raw)
    impl.forward(raw)
    assert len(built) == 3 and built[1].lin.weight is not built[2].lin.weight
    assert head.release() is built[0] and head.checked is None


@pytest.mark.parametrize("name", sorted(ROWS))
def test_closures_as_upstream(monkeypatch, name):
    spec, wl = _small(name)
    impl = spec.build(wl, "huggingface", CPU, "0.6.0")
    gen = torch.Generator().manual_seed(0)
    fwd, fwd_g2n = protocol.speed_closure(spec, impl, wl, "cpu", gen, "forward")
    back, g2n = protocol.speed_closure(spec, impl, wl, "cpu", gen, "backward")
    full, full_g2n = protocol.speed_closure(spec, impl, wl, "cpu", gen, "full")
    assert fwd_g2n is None and full_g2n is None and len(g2n) == 1
    assert g2n[0].requires_grad is (name not in FROZEN)  # upstream's _input, grad or none
    memory = protocol.memory_closure(spec, impl, wl, "cpu", gen, "backward")
    calls = _backward_calls(monkeypatch)
    back()
    back()
    full()
    memory()
    assert calls == [True, True, None, None]  # memory measures full whatever the pass


def test_kto_weight_gradient_accumulates_over_backward_calls():
    spec, wl = _small("kto_loss")
    impl = spec.build(wl, "huggingface", CPU, "0.6.0")
    back, g2n = protocol.speed_closure(spec, impl, wl, "cpu", torch.Generator(), "backward")
    weight = impl.module["lin"].weight
    back()
    once = weight.grad.clone()
    back()
    assert torch.allclose(weight.grad, 2 * once) and g2n[0].grad is None


@pytest.mark.parametrize("name", sorted(ROWS))
@pytest.mark.parametrize("pass_", ["forward", "backward", "full"])
@pytest.mark.parametrize("metric", ["latency", "memory"])
def test_cpu_job_runs(name, pass_, metric):
    job = make_job(name, provider="huggingface", pass_=pass_, metric=metric,
                   parameters=UPSTREAM[name], rep=5)  # fmt: skip
    payload = run_job(job, seed=1, force_cpu=True)["payload"]
    assert payload["status"] == "ok", payload["error"]
    assert payload["correctness"]["passed"]
    assert payload["workload"]["unusedParameters"] == {"mode": "forward"}
    assert payload["workload"]["scaledDown"]
    assert payload["measurement"]["unit"] == ("ms" if metric == "latency" else "MiB")


@pytest.mark.parametrize("name", sorted(ROWS))
def test_liger_is_unavailable_on_the_cpu(name):
    job = make_job(name, provider="liger", parameters=UPSTREAM[name])
    assert run_job(job, force_cpu=True)["payload"]["status"] == "unavailable"


def test_the_job_issuer_issues_every_row_and_the_runner_accepts_each(db):
    from kirunner.runner import validate_job

    issued = dict.fromkeys(ROWS, 0)
    for run, doc in issued_documents("unjudged_h200", ROWS):
        checked = validate_job(doc)
        spec = get_spec(checked["benchmark"])
        assert checked["provider"] in spec.providers
        wl, unused = spec.resolve(checked["parameters"])
        assert unused == {"mode": "forward"} and wl["dtype"] == "bf16"
        issued[run.benchmark.slug] += 1
    assert issued == ROWS


@pytest.mark.parametrize("unpaired", [False, True], ids=["dpo", "kto"])
def test_the_policy_logits_are_gone_when_the_reference_logits_are_made(monkeypatch, unpaired):
    """HFAlignmentLoss makes the policy's logits in concatenated_forward and the reference's
    after it returns: its bf16 product (and, for KTO, whose chosen and rejected logits are
    copies, its float32 logits) are freed by then. Written inline, the baseline held them
    through the reference's: one bf16 logits tensor more at dpo's peak on the H100, two at
    kto's (bench/fidelity/h100-ab7fe2a/README.md)."""
    import gc

    from kirunner.families import preference

    b, t, h, v = 4, 8, 16, 64
    gen = torch.Generator().manual_seed(0)
    x, ref_x = (torch.randn(b, t, h, generator=gen).bfloat16() for _ in range(2))
    weight, ref_weight = (torch.randn(v, h, generator=gen).bfloat16() for _ in range(2))
    weight.requires_grad_(True)
    bias = torch.zeros(v, dtype=torch.bfloat16, requires_grad=True)
    target = torch.randint(0, v, (b, t), generator=gen)
    live: list[dict] = []
    logps = preference.hf_batch_logps

    def spy(logits, labels, ignore_index, average):
        if not torch.is_grad_enabled():  # the reference's, made under no_grad
            gc.collect()
            shaped = [o for o in gc.get_objects() if torch.is_tensor(o) and o.shape == (b, t, v)]
            live.append(
                {d: sum(o.dtype == d for o in shaped) for d in (torch.bfloat16, torch.float32)}
            )
        return logps(logits, labels, ignore_index, average)

    monkeypatch.setattr(preference, "hf_batch_logps", spy)
    alignment, extra = (hf_kto, {"kl": torch.zeros(1)}) if unpaired else (hf_dpo, {})
    labels = torch.tensor([True, False, True, True]) if unpaired else None
    loss, _ = hf_alignment_loss(weight, x, target, bias, alignment, ignore_index=42,
                                compute_nll=False, unpaired=unpaired, labels=labels,
                                ref=(ref_x, ref_weight, None), beta=0.1, **extra)  # fmt: skip
    loss.backward()
    # bf16: the reference's own logits only. float32: the policy's log-softmax, which autograd
    # keeps for backward, and for dpo the policy's logits, of which the chosen and rejected
    # logits concatenated_forward returns are views (KTO's are copies).
    assert live == [{torch.bfloat16: 1, torch.float32: 1 if unpaired else 2}]

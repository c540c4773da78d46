"""A failed correctness check judged by upstream's own test tolerance (runs/evidence_correctness.py):
the table's entries and where they come from, the decision from recorded figures (within,
outside, undecided) checked against the elementwise truth, the rule's outcomes, and the
re-judging of results recorded as `incorrect` (manage.py rerun rejudge)."""

from __future__ import annotations

import json
import random

import pytest
import torch

from kirunner.check import _Stats
from reruns.services import rejudge_candidates, result_record, run_rejudge
from runs import evidence_correctness as ec
from runs.evidence import NoVerdict, outcome_decide
from runs.models import Evidence, EvidenceEvent
from tests.factories import BenchmarkFactory, PublicationFactory, RunFactory, SourceFactory
from tests.factories_reruns import TEST_KEYS, double_result, job_for, sign

FNA = "fused_neighborhood_attention"


def test_the_table_names_upstreams_test_for_each_kernel_and_dtype():
    """The shipped table holds what Liger-Kernel's tests at 02bac05 set (each value read from
    the parametrize line bench/upstream_test_tolerance.py names)."""
    fna = ec.upstream_tolerance(FNA, "fp32", "02bac056330eb06711ef5dbb0325cc2087702a3d")
    assert (fna.atol, fna.rtol) == (5e-3, 5e-3)
    assert fna.source.startswith("test/transformers/test_fused_neighborhood_attention.py:108 ")
    assert ec.upstream_tolerance(FNA, "bf16", "02bac05").atol == 5e-2
    dpo = ec.upstream_tolerance("dpo_loss", "bf16", "02bac05")
    assert (dpo.atol, dpo.rtol) == (5e-2, 5e-1) and "test_dpo_loss.py:147" in dpo.source
    # DyT's alpha gradient has its own pair in upstream's test.
    dyt = ec.upstream_tolerance("dyt_beta=True", "fp32", "02bac05")
    assert dyt.bound("grad_alpha") == (1e-5, 1e-3) and dyt.bound("grad_x") == (1e-5, 1e-5)
    # No test at this commit, or a row of another commit: no upstream tolerance.
    assert ec.upstream_tolerance("llama4_rope", "bf16", "02bac05") is None
    assert ec.upstream_tolerance(FNA, "fp32", "1234567") is None
    assert ec.upstream_tolerance(FNA, "fp32", "") is None


def test_each_commit_is_judged_by_its_own_tests():
    """One table per commit: a row of ab7fe2a is judged by the tests at ab7fe2a, which set
    other values for some kernels and cover kernels 02bac05 had no test for."""
    assert ec.upstream_tolerance("geglu", "bf16", "02bac05").atol == 1e4
    geglu = ec.upstream_tolerance("geglu", "bf16", "ab7fe2ad")
    assert (geglu.atol, geglu.rtol) == (1e-2, 1e-2) and geglu.source.endswith(" at ab7fe2a")
    assert ec.upstream_tolerance("fused_add_rms_norm", "bf16", "02bac05") is None
    added = ec.upstream_tolerance("fused_add_rms_norm", "bf16", "ab7fe2a")
    assert (added.atol, added.rtol) == (0.2, 0.02)
    assert "test_fused_add_rms_norm.py:103" in added.source
    # mhc's test names its tolerances per output, not atol/rtol: none is read for it.
    assert ec.upstream_tolerance("mhc_pre", "bf16", "ab7fe2a") is None


def check(err, ref_max, *, scale=1.0, worst=None, own=(1e-4, 1e-4), **extra):
    entry = {"name": "y", "maxAbsErr": err, "maxRelErr": err / ref_max if ref_max else None,
             "scale": scale, "worstRatio": worst if worst is not None else 50.0,
             "atol": own[0], "rtol": own[1], "passed": False}  # fmt: skip
    return entry | extra


STATES = [
    ("largest error under atol", check(4e-3, 50.0), "within"),
    ("larger than the bound at the largest |ref|", check(0.3, 50.0), "outside"),
    # err <= 2 * (1e-4 * 1 + 1e-4 * x) is under 5e-3 + 5e-3 * x at every x.
    ("the runner's own bound, scaled, lies under upstream's", check(0.01, 50.0, worst=2.0), "within"),
    ("only small-|ref| elements could miss: cannot tell", check(0.035, 47.0, scale=13.8, worst=6.98), "undecided"),
    ("a NaN or Inf", {"name": "y", "maxAbsErr": None, "problem": "NaN or Inf"}, "outside"),
    ("a shape mismatch", check(0.0, 1.0, problem="shape [2] != reference [3]"), "outside"),
    ("an analytically zero gradient the kernel misses", check(0.11, 0.0), "outside"),
    ("bands: every band under its bound", check(0.035, 47.0, errorByRef=[[0.0, 0.0, 1e-3], [0.5, 1.0, 6e-3], [10.0, 47.0, 0.035]]), "within"),
    ("bands: a band over its bound at its top", check(0.035, 47.0, errorByRef=[[0.1, 0.2, 0.03], [10.0, 47.0, 0.035]]), "outside"),
    ("bands: a band straddling its bound", check(0.035, 47.0, errorByRef=[[1.0, 2.0, 0.012]]), "undecided"),
]  # fmt: skip


@pytest.mark.parametrize("name,entry,state", STATES, ids=[s[0] for s in STATES])
def test_tensor_state(name, entry, state):
    assert ec.tensor_state(entry, 5e-3, 5e-3) == state


@pytest.mark.parametrize("seed", range(8))
def test_the_decision_never_contradicts_the_elementwise_truth(seed):
    """Errors and references drawn at random, recorded as the runner records them (largest
    error, relative error, RMS scale, worst ratio to its own bound, bands of |ref|): whatever
    the figures say for upstream's (atol, rtol) is what upstream's elementwise test gives,
    or undecided; never the opposite."""
    gen = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)
    ref = torch.randn(4096, generator=gen, dtype=torch.float64) * 10 ** rng.uniform(-2, 2)
    err = torch.rand(4096, generator=gen, dtype=torch.float64) * 10 ** rng.uniform(-4, -1)
    err *= 1 + ref.abs() * rng.uniform(0, 0.05)
    own_atol, own_rtol = 1e-4, 1e-4
    scale = float(ref.pow(2).mean().sqrt())
    stats = _Stats()
    stats.add(ref + err, ref, own_atol * scale + own_rtol * ref.abs(), None)
    recorded = {"name": "y", "maxAbsErr": stats.max_abs, "maxRelErr": stats.max_abs / stats.ref_max,
                "scale": scale, "worstRatio": stats.worst, "atol": own_atol, "rtol": own_rtol}  # fmt: skip
    decided = 0
    for atol, rtol in [(1e-3, 1e-3), (5e-3, 5e-3), (5e-2, 5e-2), (1e-2, 0.0), (1e-5, 5e-4)]:
        truth = bool((err <= atol + rtol * ref.abs()).all())
        for entry in (recorded, recorded | {"errorByRef": stats.bands()}):
            state = ec.tensor_state(entry, atol, rtol)
            assert state == "undecided" or state == ("within" if truth else "outside")
            decided += state != "undecided"
    assert decided  # the test decides something


def test_bands_cover_every_element_with_its_largest_error():
    stats = _Stats()
    ref = torch.tensor([0.0, 1e-15, 0.5, 0.55, 3.0, 2e9], dtype=torch.float64)
    err = torch.tensor([1e-3, 2e-3, 1e-4, 5e-4, 1e-2, 7.0], dtype=torch.float64)
    stats.add(ref + err, ref, torch.ones_like(ref), None)
    bands = stats.bands()
    assert bands[0] == [0.0, 0.0, 1e-3]  # exact zeros in their own band
    assert bands[1][0] == 0.0 and bands[1][1] < 1e-11 and bands[1][2] == 2e-3  # the lowest band
    for value, e in zip(ref.tolist()[2:], err.tolist()[2:], strict=True):
        (band,) = [b for b in bands if b[0] <= value <= b[1]]
        assert band[2] >= e * (1 - 1e-9)  # (ref + err) - ref rounds
    assert bands[-1][1] == 2e9  # the top band reaches the largest |ref|


@pytest.fixture
def fna_run(db):
    source = SourceFactory(slug="liger-kernel-ci")
    publication = PublicationFactory(source=source, slug="02bac05", upstream_commit="02bac05")
    return RunFactory(source=source, publication=publication, median=1_000_000,
                      benchmark=BenchmarkFactory(slug=FNA), provider="liger")  # fmt: skip


def decide(run, checks, *, passed=False, dtype="fp32"):
    return outcome_decide(run=run, correctness_passed=passed, device="cpu", gpu_product=None,
                          measurement={}, checks=checks, dtype=dtype, check_worst=20.0)  # fmt: skip


def test_outside_upstreams_tolerance_is_incorrect_and_says_where_the_tolerance_comes_from(fna_run):
    out = decide(fna_run, [check(0.3, 50.0, name="grad_v_proj.bias")])
    assert out.level == Evidence.INCORRECT
    assert "test_fused_neighborhood_attention.py:108" in out.facts["why"]
    assert "grad_v_proj.bias max error 0.3 at |ref| up to 50" in out.facts["why"]
    assert out.facts["accuracy"] == [{"name": "grad_v_proj.bias", "maxAbsErr": 0.3,
                                      "maxRelErr": 0.3 / 50.0}]  # fmt: skip


def test_within_upstreams_tolerance_the_check_does_not_stop_the_verdict(fna_run):
    """TF32 error that misses the runner's float64 bound (20x) but meets upstream's 5e-3."""
    out = decide(fna_run, [check(8.9e-4, 1.0), check(4e-3, 30.0, name="grad_x")])
    assert out.level == Evidence.CHECKED  # a CPU result: checked
    assert out.facts["upstreamCheck"]["state"] == "within"
    assert "missed by up to 20 times" in out.facts["checkNote"]
    assert [a["name"] for a in out.facts["accuracy"]] == ["y", "grad_x"]


def test_undecided_is_no_verdict(fna_run):
    with pytest.raises(NoVerdict, match="cannot tell"):
        decide(fna_run, [check(0.035, 47.0, scale=13.8, worst=6.98)])


def test_the_reference_implementations_own_error_is_allowed_for():
    """Upstream's test compares with its reference in the same dtype: an error the reference
    itself reaches on the cell is not the kernel's fault; one beyond it by more than the
    bound is."""
    entry = check(0.3, 50.0)  # outside against float64 (test_tensor_state)
    assert ec.tensor_state(entry, 5e-3, 5e-3, slack=1e-5) == "outside"
    assert ec.tensor_state(entry, 5e-3, 5e-3, slack=0.29) != "outside"
    zero = check(0.113, 0.0)  # a gradient that is exactly 0 (FNA's k bias), bf16's bound
    assert ec.tensor_state(zero, 5e-2, 5e-2, slack=0.0527) == "outside"  # 0.060 > 0.0526
    assert ec.tensor_state(zero, 5e-2, 5e-2, slack=0.07) != "outside"  # 0.043 < 0.0535
    bands = check(0.035, 47.0, errorByRef=[[0.1, 0.2, 0.03], [10.0, 47.0, 0.035]])
    assert ec.tensor_state(bands, 5e-3, 5e-3, slack=0.0) == "outside"
    assert ec.tensor_state(bands, 5e-3, 5e-3, slack=0.03) != "outside"


def test_a_low_precision_output_without_its_references_error_is_undecided():
    tolerance = ec.upstream_tolerance(FNA, "bf16", "02bac05")
    judged = ec.judge([check(0.113, 0.0, name="grad_k_proj.bias")], tolerance, None, "bf16")
    assert judged.state == "undecided"
    assert "reference implementation's own error on this cell is not measured" in judged.why()
    # fp32: the reference's rounding is far under any tolerance upstream sets for it.
    fp32 = ec.upstream_tolerance(FNA, "fp32", "02bac05")
    assert ec.judge([check(0.3, 50.0)], fp32, None, "fp32").state == "outside"
    known = ec.Reference({"grad_k_proj.bias": 0.0527}, ("torch",))
    judged = ec.judge([check(0.113, 0.0, name="grad_k_proj.bias")], tolerance, known, "bf16")
    assert judged.state == "outside" and judged.facts()["reference"] == ["torch"]


def _reference_rerun(run, provider, errors):
    """A rerun of the cell's `provider` that recorded `errors` (tensor -> largest error)."""
    twin = RunFactory(source=run.source, publication=run.publication, benchmark=run.benchmark,
                      workload=run.workload, environment=run.environment, provider=provider,
                      timed_pass=run.timed_pass)  # fmt: skip
    accuracy = [{"name": n, "maxAbsErr": e, "maxRelErr": None} for n, e in errors.items()]
    EvidenceEvent.objects.create(run=twin, from_level=Evidence.REPORTED, to_level=Evidence.CHECKED,
                                 outcome=Evidence.CHECKED, cause="test", facts={"accuracy": accuracy})  # fmt: skip
    return twin


def test_the_rule_reads_the_references_newest_rerun_on_the_same_cell(fna_run):
    liger = RunFactory(source=fna_run.source, publication=fna_run.publication,
                       benchmark=fna_run.benchmark, workload=fna_run.workload,
                       environment=fna_run.environment, provider="liger")  # fmt: skip
    bias = [check(0.113, 0.0, name="grad_k_proj.bias")]
    with pytest.raises(NoVerdict, match="not measured"):
        decide(liger, bias, dtype="bf16")
    # Another cell's reference (another pass) is not this cell's.
    other = _reference_rerun(liger, "torch", {"grad_k_proj.bias": 0.2})
    other.timed_pass = "backward"
    other.save()
    with pytest.raises(NoVerdict, match="not measured"):
        decide(liger, bias, dtype="bf16")
    _reference_rerun(liger, "torch", {"grad_k_proj.bias": 0.0527})
    out = decide(liger, bias, dtype="bf16")
    assert out.level == Evidence.INCORRECT
    assert "allowing torch's own error on this cell" in out.facts["why"]
    assert "max error 0.113 (the reference's own 0.0527)" in out.facts["why"]
    # The reference as inaccurate as the kernel: not the kernel's fault.
    _reference_rerun(liger, "torch_compile", {"grad_k_proj.bias": 0.1})
    out = decide(liger, bias, dtype="bf16")
    assert out.level == Evidence.CHECKED and out.facts["upstreamCheck"]["state"] == "within"
    assert out.facts["upstreamCheck"]["reference"] == ["torch", "torch_compile"]


def test_the_reference_implementation_itself_is_never_outside_its_own_tests_tolerance(fna_run):
    """Upstream's test measures the kernel against torch: torch's own finite float64 error
    (cuDNN's TF32 convolutions in fp32 sparse multi-token attention) is accuracy, not a miss;
    a NaN in it is outside whatever the tolerance."""
    torch_run = RunFactory(source=fna_run.source, publication=fna_run.publication,
                           benchmark=fna_run.benchmark, workload=fna_run.workload,
                           environment=fna_run.environment, provider="torch")  # fmt: skip
    far = [check(0.3, 50.0, name="grad_v_proj.bias")]
    assert decide(fna_run, far).level == Evidence.INCORRECT  # the kernel: outside
    out = decide(torch_run, far)
    assert out.level == Evidence.CHECKED
    assert out.facts["upstreamCheck"]["state"] == "within"
    assert out.facts["upstreamCheck"]["isReference"] is True
    assert "measures the kernel against this implementation" in out.facts["checkNote"]
    assert out.facts["accuracy"][0]["maxAbsErr"] == 0.3  # still shown, as accuracy
    nan = [{"name": "y", "maxAbsErr": None, "maxRelErr": None, "problem": "NaN in the output"}]
    assert decide(torch_run, nan).level == Evidence.INCORRECT


def test_without_an_upstream_test_the_runners_own_criterion_stands(fna_run):
    fna_run.publication.upstream_commit = "1234567"
    fna_run.publication.save()
    out = decide(fna_run, [check(8.9e-4, 1.0)])
    assert out.level == Evidence.INCORRECT
    assert "no upstream test at this row's commit" in out.facts["why"]


@pytest.fixture
def keys(settings):
    settings.KERNELINDEX_WORKER_KEYS = TEST_KEYS


def _record_incorrect(run, checks, monkeypatch):
    """Record a failed check as the rule before upstream's tolerance did: `incorrect`."""
    job = job_for(run)
    envelope = double_result(job, KI_DOUBLE_INCORRECT="1")
    envelope["payload"]["correctness"]["checks"] = checks
    envelope["payload"].setdefault("workload", {})["ran"] = {"dtype": "fp32"}
    with monkeypatch.context() as m:
        m.setattr(ec, "upstream_tolerance", lambda *a: None)
        receipt = result_record(envelope=sign(json.loads(json.dumps(envelope))))
    run.refresh_from_db()
    assert run.evidence == Evidence.INCORRECT
    return receipt


REJUDGED = [
    ("within", [check(8.9e-4, 1.0)], Evidence.CHECKED),
    ("outside", [check(0.3, 50.0)], Evidence.INCORRECT),
    ("undecided", [check(0.035, 47.0, scale=13.8, worst=6.98)], Evidence.REPORTED),
]  # fmt: skip


@pytest.mark.parametrize("name,checks,level", REJUDGED, ids=[r[0] for r in REJUDGED])
def test_rejudge_goes_through_the_evidence_rule(fna_run, keys, monkeypatch, name, checks, level):
    receipt = _record_incorrect(fna_run, checks, monkeypatch)
    assert rejudge_candidates() == [fna_run.pk]
    events = EvidenceEvent.objects.count()
    run_rejudge(run=fna_run)
    fna_run.refresh_from_db()
    assert fna_run.evidence == level
    latest = EvidenceEvent.objects.latest_for(fna_run)
    assert EvidenceEvent.objects.count() == events + 1
    assert latest.cause == f"rejudge:{receipt.job.uuid}"
    assert (latest.from_level, latest.to_level) == (Evidence.INCORRECT, level)
    if level == Evidence.INCORRECT:
        assert "test_fused_neighborhood_attention.py:108" in latest.facts["why"]
    if level == Evidence.REPORTED:
        assert "cannot tell" in latest.facts["why"]
    # A second pass changes nothing more.
    assert run_rejudge(run=fna_run) == "skipped"
    assert EvidenceEvent.objects.count() == events + 1


def test_rejudging_replays_a_runs_results_in_order_from_reported(fna_run, keys, monkeypatch):
    """An undecided result, then one within upstream's tolerance: as if loaded again, the
    first carries no verdict and the second decides the level from `reported`."""
    _record_incorrect(fna_run, [check(0.035, 47.0, scale=13.8, worst=6.98)], monkeypatch)
    second = _record_incorrect(fna_run, [check(8.9e-4, 1.0)], monkeypatch)
    assert run_rejudge(run=fna_run) == Evidence.CHECKED
    rejudged = EvidenceEvent.objects.filter(run=fna_run, cause__startswith="rejudge:")
    assert [e.cause_job for e in rejudged] == [second.job.uuid]
    assert rejudged.get().from_level == Evidence.INCORRECT

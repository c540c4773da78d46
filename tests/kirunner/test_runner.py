"""Runner end to end through the function API, on the CPU (small shapes)."""

from __future__ import annotations

import json
import math
import socket

import pytest

import kirunner
from kirunner.canonical import canonicalize
from kirunner.kernels import KERNELS

from .jobs import KERNELS as JOB_KERNELS
from .jobs import WORKLOADS, make_job

REP_MS = 5.0  # keep CPU runs short; recorded as repSource "override"


def run(job: dict, **kw) -> dict:
    kw.setdefault("force_cpu", True)
    kw.setdefault("rep", REP_MS)
    kw.setdefault("seed", 1234)
    return kirunner.run_job(job, **kw)


def assert_result_shape(result: dict) -> None:
    assert result["apiVersion"] == "kernelindex.dev/v1alpha1"
    assert result["kind"] == "RerunResult"
    assert set(result) == {"apiVersion", "kind", "payload", "signature"}
    p = result["payload"]
    for key in (
        "job",
        "run",
        "benchmark",
        "pass",
        "metric",
        "provider",
        "device",
        "environment",
        "implementation",
        "workload",
        "correctness",
        "measurement",
        "startedAt",
        "finishedAt",
        "runner",
        "error",
        "status",
    ):
        assert key in p, key
    assert set(p["job"]) >= {"id", "nonce"}
    assert "publicId" in p["run"]
    assert p["runner"]["name"] == "kirunner" and p["runner"]["version"] == kirunner.__version__
    assert p["startedAt"].endswith("Z") and p["finishedAt"].endswith("Z")
    assert p["startedAt"] <= p["finishedAt"]
    # Everything must be signable: finite numbers, safe integers, string keys.
    canonicalize(p)
    json.dumps(result, allow_nan=False)


def assert_measured(result: dict, metric: str = "latency") -> None:
    p = result["payload"]
    assert p["error"] is None, p["error"]
    assert p["device"] == "cpu"
    impl = p["implementation"]
    assert set(impl) >= {"requestedRevision", "usedRevision", "package"}
    assert impl["usedRevision"]
    env = p["environment"]
    for key in ("device", "python", "torch"):
        assert env.get(key), key
    assert "hostname" not in json.dumps(env).lower()
    host = socket.gethostname()
    if len(host) >= 6:
        assert host not in json.dumps(result)
    wl = p["workload"]
    assert wl["requested"] and wl["ran"]
    c = p["correctness"]
    assert set(c) >= {"passed", "reference", "checks"}
    for check in c["checks"]:
        assert set(check) >= {"name", "maxAbsErr", "atol", "rtol", "passed"}
    m = p["measurement"]
    for key in ("metric", "unit", "median", "p20", "p80", "timer", "rep", "samples", "iterations"):
        assert key in m, key
    assert m["metric"] == metric
    assert len(m["samples"]) == m["iterations"] > 0
    assert all(isinstance(s, float) and math.isfinite(s) and s > 0 for s in m["samples"])
    assert m["p20"] <= m["median"] <= m["p80"]
    assert min(m["samples"]) <= m["p20"] and m["p80"] <= max(m["samples"])
    if metric == "latency":
        assert m["unit"] == "ms" and m["timer"] == "cpu_perf_counter"
        assert m["rep"] == REP_MS and m["repSource"] == "override"
    else:
        assert m["unit"] == "MiB" and m["iterations"] == 10


def test_every_kernel_has_a_job_fixture() -> None:
    # The family modules' kernels have their upstream fixtures in test_families.py and
    # test_family_attention.py, test_family_losses.py, test_family_preference.py and (the
    # kernels new at ab7fe2a) test_family_ab7fe2a.py.
    from tests.kirunner.test_families import UPSTREAM
    from tests.kirunner.test_family_ab7fe2a import UPSTREAM as AB7FE2A
    from tests.kirunner.test_family_attention import UPSTREAM as ATTENTION
    from tests.kirunner.test_family_losses import COVERED
    from tests.kirunner.test_family_preference import UPSTREAM as PREFERENCE

    fixtures = set(UPSTREAM) | set(ATTENTION) | set(COVERED) | set(PREFERENCE) | set(AB7FE2A)
    assert set(JOB_KERNELS) | fixtures == set(KERNELS)


@pytest.mark.parametrize("benchmark", JOB_KERNELS)
@pytest.mark.parametrize("pass_", ["forward", "backward", "full"])
def test_huggingface_latency_matches_reference(benchmark: str, pass_: str) -> None:
    result = run(make_job(benchmark, pass_=pass_))
    assert_result_shape(result)
    p = result["payload"]
    assert p["status"] == "ok", p["error"] or p["correctness"]
    assert_measured(result)
    assert p["correctness"]["passed"] is True
    names = [c["name"] for c in p["correctness"]["checks"]]
    spec = KERNELS[benchmark]
    assert names[: len(spec.outputs)] == list(spec.outputs)
    if pass_ == "forward":
        assert not any(n.startswith("grad_") for n in names)
    else:
        assert {f"grad_{n}" for n in spec.inputs} <= set(names)


@pytest.mark.parametrize("benchmark", JOB_KERNELS)
def test_huggingface_memory(benchmark: str) -> None:
    result = run(make_job(benchmark, metric="memory"))
    assert_result_shape(result)
    assert result["payload"]["status"] == "ok", result["payload"]["error"]
    assert_measured(result, metric="memory")
    assert result["payload"]["measurement"]["timer"] == "cpu_profiler_allocated"


def test_cpu_run_records_requested_and_scaled_workload() -> None:
    job = make_job("llama4_rope")
    p = run(job)["payload"]
    assert p["workload"]["requested"] == job["workload"]["parameters"]
    ran = p["workload"]["ran"]
    assert ran["seq"] < 4096 and ran["hidden"] < 8192 and ran["dtype"] == "bf16"
    assert ran["hidden"] % ran["q_heads"] == 0 and ran["q_heads"] % ran["kv_heads"] == 0
    assert "scaledDown" in p["workload"]


@pytest.mark.parametrize("benchmark", JOB_KERNELS)
def test_liger_is_cleanly_unavailable_on_cpu(benchmark: str) -> None:
    result = run(make_job(benchmark, provider="liger"))
    assert_result_shape(result)
    p = result["payload"]
    assert p["status"] == "unavailable"
    assert p["measurement"] is None and p["correctness"] is None
    assert p["error"].startswith("unavailable:")
    assert "CUDA" in p["error"] or "cuda" in p["error"]
    assert p["device"] == "cpu"
    assert p["environment"]["device"] == "cpu"


def test_rep_defaults_to_job_then_upstream() -> None:
    p = kirunner.run_job(make_job("rms_norm", rep=7), force_cpu=True, seed=1)["payload"]
    m = p["measurement"]
    assert (m["rep"], m["repSource"], m["upstreamRep"]) == (7.0, "job", 500)
    assert m["notes"] and "500" in m["notes"][0]
    p = kirunner.run_job(make_job("swiglu", rep=None), force_cpu=True, seed=1)["payload"]
    m = p["measurement"]
    assert (m["rep"], m["repSource"]) == (10.0, "upstream")


def test_upstream_parameter_names_are_accepted() -> None:
    params = {
        "T": 2048,
        "hidden_size": 8192,
        "num_q_heads": 32,
        "num_kv_heads": 8,
        "dtype": "torch.bfloat16",
    }
    p = run(make_job("rope", parameters=params))["payload"]
    assert p["status"] == "ok", p["error"]
    assert p["workload"]["resolved"] == {
        "seq": 2048,
        "hidden": 8192,
        "q_heads": 32,
        "kv_heads": 8,
        "dtype": "bf16",
    }
    p = run(make_job("cross_entropy", parameters={"B": 8, "T": 2048, "V": 4096}))["payload"]
    assert p["status"] == "ok", p["error"]
    assert p["workload"]["resolved"]["dtype"] == "fp32"  # upstream's implicit default
    p = run(make_job("geglu", parameters={**WORKLOADS["geglu"], "bsz": 8}))["payload"]
    assert p["status"] == "ok", p["error"]


@pytest.mark.parametrize(
    "benchmark,params,needle",
    [
        ("llama4_rope", {"seq": 4096, "hidden": 8192, "q_heads": 32, "dtype": "bf16"}, "kv_heads"),
        ("rms_norm", {"hidden": 4096, "eps": 1e-6, "dtype": "bf16"}, "M"),
        ("swiglu", {"batch": 4, "seq": 8, "hidden": 64, "dtype": "bf16"}, "intermediate"),
        ("rope", {"seq": 8, "hidden": 64, "q_heads": 4, "kv_heads": 2, "dtype": "int8"}, "dtype"),
        (
            "rope",
            {"seq": 8, "T": 16, "hidden": 64, "q_heads": 4, "kv_heads": 2, "dtype": "bf16"},
            "conflicting",
        ),
        (
            "rope",
            {"seq": 8, "hidden": 60, "q_heads": 8, "kv_heads": 2, "dtype": "bf16"},
            "multiple",
        ),
    ],
)
def test_bad_workloads_say_what_is_wrong(benchmark: str, params: dict, needle: str) -> None:
    p = run(make_job(benchmark, parameters=params))["payload"]
    assert p["status"] == "invalid"
    assert needle in p["error"]
    assert p["measurement"] is None


@pytest.mark.parametrize(
    "mutate,needle",
    [
        (lambda j: j.__setitem__("apiVersion", "v0"), "apiVersion"),
        (lambda j: j.__setitem__("kind", "Job"), "kind"),
        (lambda j: j.__setitem__("benchmark", "softmax_xyz"), "not supported"),
        (lambda j: j.__setitem__("provider", "torch"), "no provider"),
        (lambda j: j.__setitem__("pass", "sideways"), "pass"),
        (lambda j: j.__setitem__("metric", "throughput"), "metric"),
        (lambda j: j["job"].pop("nonce"), "job.nonce"),
        (lambda j: j["protocol"].__setitem__("family", "other"), "family"),
    ],
)
def test_bad_jobs_produce_an_error_result(mutate, needle: str) -> None:
    job = make_job("rms_norm")
    mutate(job)
    result = run(job)
    assert_result_shape(result)
    p = result["payload"]
    assert p["status"] in {"invalid", "unavailable"}
    assert needle in p["error"]
    assert p["measurement"] is None


def test_result_echoes_job_identity() -> None:
    job = make_job("layer_norm")
    p = run(job)["payload"]
    assert p["job"] == {"id": job["job"]["id"], "nonce": job["job"]["nonce"]}
    assert p["run"] == {"publicId": "01a0202b"}
    assert (p["benchmark"], p["pass"], p["metric"], p["provider"]) == (
        "layer_norm",
        "full",
        "latency",
        "huggingface",
    )
    assert p["implementation"]["package"] == "torch"
    assert p["implementation"]["requestedRevision"] is None


def test_a_job_leaves_the_process_objects_frozen_and_still_frees_its_own() -> None:
    """The collections a job makes walk only the job's objects (runner._freeze_survivors),
    and garbage made after the freeze is still collected."""
    import gc
    import weakref

    class Held:
        pass

    held = Held()
    held.cycle = held
    run(make_job("rms_norm"))
    try:
        assert gc.get_freeze_count() > 0
        assert not any(o is held for o in gc.get_objects())
        garbage = Held()
        garbage.cycle = garbage
        ref = weakref.ref(garbage)
        del garbage
        gc.collect()
        assert ref() is None
    finally:
        gc.unfreeze()

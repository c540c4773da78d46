"""The evidence rule's fidelity gate (runs/evidence.py, rule 6): a timing or memory verdict
only where the committed fidelity table establishes the runner against the source's script,
and a peak memory only as upstream's _test_memory reads it; re-judging applies it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from reruns.services import rejudge_candidates, result_record, run_rejudge
from runs import evidence
from runs.evidence import outcome_decide
from runs.fidelity import table as fidelity
from runs.models import Evidence, EvidenceEvent
from tests.factories import (
    BenchmarkFactory,
    GpuFactory,
    PublicationFactory,
    RunFactory,
    SourceFactory,
    workload_for,
)
from tests.factories_reruns import TEST_KEYS, double_result, job_for, sign

pytestmark = pytest.mark.fidelity_gate
REPO = Path(__file__).resolve().parents[2]
PEAK_MIB = 1610.0
H100 = "NVIDIA H100"
TABLE_ROWS = json.loads((REPO / "data/fidelity/liger-kernel-ci.json").read_text())["rows"]


@pytest.fixture(autouse=True)
def _no_upstream_table(monkeypatch):
    # The global tolerances (latency 35 %, memory 1 %), not the shipped per-cell table.
    monkeypatch.setattr(evidence, "_table", lambda: {"cells": {}, "classes": {}})


def ci_run(kernel: str, provider: str, timed_pass: str, metric: str, **fields):
    source = SourceFactory(slug="liger-kernel-ci", name="Liger-Kernel CI")
    unit = "B" if metric == "memory" else "ns"
    median = int(PEAK_MIB * 2**20) if metric == "memory" else 385_536
    return RunFactory(
        source=source,
        benchmark=BenchmarkFactory(slug=kernel),
        provider=provider,
        timed_pass=timed_pass,
        metric=metric,
        unit=unit,
        median=median,
        **fields,
    )


def peak(mib: float, protocol: str | None = "upstream-resident") -> dict:
    details = {"protocol": protocol} if protocol else {}
    return {"median": mib, "unit": "MiB", "details": details}


def device_bound(ms: float) -> dict:
    return {
        "median": ms,
        "unit": "ms",
        "samples": [ms] * 20,
        "diagnostics": {
            "hostEnqueue": {"median": 0.02},
            "flush": {"median": 0.06},
            "device": {"median": ms, "p20": ms * 0.995, "p80": ms * 1.005, "method": "cuda-graph"},
            "clocks": {"before": {"clockEventReasons": 0}, "after": {}},
        },
    }


def decide(run, measurement, implementation=None):
    return outcome_decide(
        run=run,
        correctness_passed=True,
        device="cuda",
        gpu_product=H100,
        measurement=measurement,
        environment={"allocatedAtStartBytes": 0},
        process="p1",
        implementation=implementation,
    )


def test_old_protocol_memory_is_checked_with_a_link_to_its_row(db):
    run = ci_run("geglu", "liger", "full", "memory")
    out = decide(run, peak(PEAK_MIB * 0.8, protocol=None))
    assert out.level == Evidence.CHECKED
    assert "earlier protocol" in out.facts["why"]
    assert "322-338 MiB low" in out.facts["why"]
    assert out.facts["withheld"]["level"] == Evidence.NOT_REPRODUCED
    assert (
        out.facts["fidelity"]["url"] == "/sources/liger-kernel-ci/fidelity/#geglu-full-memory-liger"
    )


def test_new_protocol_memory_on_an_established_row_gets_its_verdict(db):
    run = ci_run("geglu", "liger", "full", "memory")
    within = decide(run, peak(PEAK_MIB))
    assert within.level == Evidence.REPRODUCED
    assert within.facts["fidelity"]["status"] == fidelity.ESTABLISHED
    assert "withheld" not in within.facts
    assert decide(run, peak(PEAK_MIB * 0.8)).level == Evidence.NOT_REPRODUCED


def test_device_bound_latency_on_an_established_row_gets_its_verdict(db):
    run = ci_run("cross_entropy", "huggingface", "forward", "latency")
    assert decide(run, device_bound(0.385536)).level == Evidence.REPRODUCED
    assert decide(run, device_bound(0.385536 * 2)).level == Evidence.NOT_REPRODUCED


def test_dyt_torch_compile_needs_the_runner_that_compiles_as_the_script(db):
    """The table establishes the runner that compiles (or runs eager) each DyT cell as the
    script's process does; a result of the runner before it records no such note."""
    run = ci_run("dyt_beta=False", "torch_compile", "forward", "latency")
    before = decide(run, device_bound(0.385536), {"notes": []})
    assert before.level == Evidence.CHECKED
    assert "DyT torch_compile timed by the runner before" in before.facts["why"]
    assert before.facts["withheld"]["level"] == Evidence.REPRODUCED
    note = "compiled, as in the script's process (one of the first 8 cells it met)"
    assert decide(run, device_bound(0.385536), {"notes": [note]}).level == Evidence.REPRODUCED


def at_commit(commit: str) -> dict:
    source = SourceFactory(slug="liger-kernel-ci", name="Liger-Kernel CI")
    return {"publication": PublicationFactory(source=source, slug=commit, upstream_commit=commit)}


def test_a_row_measured_at_another_commit_carries_only_where_the_script_measures_alike(
    db, monkeypatch
):
    """DyT's script was rewritten between 02bac05 and ab7fe2a (data/fidelity/script-changes/):
    a row measured beside it at one commit establishes nothing for a run of the other. A
    kernel whose script measures alike at both commits carries its row either way."""
    note = "compiled, as in the script's process (one of the first 8 cells it met)"
    key = ("dyt_beta=False", "torch_compile", "forward", "latency")
    row = next(r for r in TABLE_ROWS if (r["kernel"], r["provider"], r["pass"], r["metric"]) == key)
    at_02bac05 = row | {"upstreamCommits": ["02bac05"],
                        "byCommit": {"02bac05": row["byCommit"]["02bac05"]}}  # fmt: skip
    old = ci_run(*key, **at_commit("02bac05"))
    new = ci_run(*key, **at_commit("ab7fe2ad" + "0" * 32))
    with monkeypatch.context() as m:  # the row as it was before ab7fe2a's script was run
        m.setattr(fidelity, "_rows_by_key", lambda slug: {key: at_02bac05})
        assert decide(old, device_bound(0.385536), {"notes": [note]}).level == Evidence.REPRODUCED
        out = decide(new, device_bound(0.385536), {"notes": [note]})
    assert out.level == Evidence.CHECKED
    assert out.facts["withheld"]["level"] == Evidence.REPRODUCED
    assert out.facts["fidelity"]["status"] == fidelity.NOT_MEASURED
    reason = out.facts["fidelity"]["reason"]
    assert "compared with upstream's script at 02bac05 only" in reason
    assert "benchmark/scripts/benchmark_dyt.py measures otherwise at ab7fe2a" in reason
    assert out.facts["fidelity"]["url"].endswith("#dyt_beta-false-forward-latency-torch_compile")
    # kl_div's row, measured at ab7fe2a only: its script is the same at 02bac05.
    kl_div = ci_run("kl_div", "torch", "forward", "latency", **at_commit("02bac05"))
    assert decide(kl_div, device_bound(0.385536)).level == Evidence.REPRODUCED
    # geglu's row measured at ab7fe2a, for a row of 02bac05 (before the rewrite): none.
    geglu = ci_run("geglu", "liger", "forward", "latency", **at_commit("02bac05"))
    assert decide(geglu, device_bound(0.385536)).level == Evidence.CHECKED


def test_a_changed_script_row_measured_at_both_commits_is_judged_at_the_runs_commit(
    db, monkeypatch
):
    """A kernel whose script was rewritten between the commits (DyT) keeps each commit's
    status in its row, and a run is judged by its own commit's. DyT torch_compile full peak
    memory is established at both since call 22; here the ab7fe2a half is set otherwise."""
    key = ("dyt_beta=False", "torch_compile", "full", "memory")
    row = fidelity._rows_by_key("liger-kernel-ci")[key]
    assert {c: e["status"] for c, e in row["byCommit"].items()} == {
        "02bac05": fidelity.ESTABLISHED, "ab7fe2a": fidelity.ESTABLISHED}  # fmt: skip
    differs = {"status": fidelity.NOT_ESTABLISHED, "reason": "at ab7fe2a: peak memory differs"}
    monkeypatch.setitem(row["byCommit"], "ab7fe2a", row["byCommit"]["ab7fe2a"] | differs)
    old = ci_run(*key, **at_commit("02bac05"))
    assert decide(old, peak(PEAK_MIB)).level == Evidence.REPRODUCED
    new = ci_run(*key, **at_commit("ab7fe2ad" + "0" * 32))
    out = decide(new, peak(PEAK_MIB))
    assert out.level == Evidence.CHECKED
    assert out.facts["fidelity"]["status"] == fidelity.NOT_ESTABLISHED
    assert out.facts["fidelity"]["reason"].startswith("at ab7fe2a: peak memory differs")


def flce_forward_run(commit: str = "ab7fe2a", gpu=None):
    """fused_linear_cross_entropy huggingface forward, V 128256, bt 4096, as published at
    ab7fe2a on the H100 (7.0288 ms; run 7510f6fd of the demo): upstream's own script read this
    cell on the lent H100 (call 22) 1.5 % off the published median."""
    source = SourceFactory(slug="liger-kernel-ci", name="Liger-Kernel CI")
    benchmark = BenchmarkFactory(slug="fused_linear_cross_entropy")
    params = {"V": 128256, "bt": 4096, "hidden": 4096, "mode": "forward", "dtype": "bf16"}
    return RunFactory(
        source=source,
        benchmark=benchmark,
        provider="huggingface",
        timed_pass="forward",
        metric="latency",
        median=7_028_800,
        workload=workload_for(benchmark, **params),
        publication=PublicationFactory(source=source, slug=commit, upstream_commit=commit),
        **({"gpu": gpu} if gpu else {}),
    )


def test_a_verdict_the_scripts_own_figure_for_the_cell_contradicts_is_checked(db):
    """The row is established, yet on this very cell the runner and upstream's script part:
    the script's figure, held to the same tolerance, reproduces the published median, so the
    runner's `not-reproduced` is the runner's difference, not the kernel's."""
    run = flce_forward_run()
    cell = fidelity.script_cell(
        source_slug="liger-kernel-ci", commit="ab7fe2a", gpu="NVIDIA H100 80GB HBM3",
        kernel="fused_linear_cross_entropy", provider="huggingface", timed_pass="forward",
        metric="latency", workload=run.workload.slug,
    )  # fmt: skip
    assert cell is not None and abs(cell.figure / 7_028_800 - 1) < 0.02
    out = decide(run, device_bound(7.0288 * 1.5))  # 50 % off: outside the 35 % tolerance
    assert out.level == Evidence.CHECKED
    assert out.facts["withheld"]["level"] == Evidence.NOT_REPRODUCED
    assert out.facts["scriptCell"]["level"] == Evidence.REPRODUCED
    why = out.facts["why"]
    assert why.startswith("upstream's own script measured this cell on the NVIDIA H100 80GB HBM3")
    assert "the two harnesses disagree" in why
    agreed = decide(run, device_bound(7.0288 * 1.02))
    assert agreed.level == Evidence.REPRODUCED
    assert agreed.facts["scriptCell"]["level"] == Evidence.REPRODUCED


def test_the_scripts_cell_figure_counts_only_at_its_commit_and_gpu(db):
    """At another commit, or for another GPU product, the script measured something else:
    the runner's verdict stands on the row alone."""
    run = flce_forward_run(commit="02bac05")
    assert "scriptCell" not in decide(run, device_bound(7.0288 * 1.5)).facts
    h200 = GpuFactory(upstream_name="NVIDIA H200", slug="nvidia-h200", product="NVIDIA H200")
    out = outcome_decide(
        run=flce_forward_run(gpu=h200),
        correctness_passed=True,
        device="cuda",
        gpu_product="NVIDIA H200",
        measurement=device_bound(7.0288 * 1.5),
        environment={"allocatedAtStartBytes": 0},
        process="p1",
        implementation=None,
    )
    assert out.level == Evidence.NOT_REPRODUCED and "scriptCell" not in out.facts


def test_every_script_change_names_a_kernel_of_the_table():
    changes = fidelity.script_changes("liger-kernel-ci")
    kernels = {r["kernel"] for r in TABLE_ROWS}
    assert changes and set(changes) <= kernels
    assert all(c["script"].startswith("benchmark/scripts/benchmark_") for c in changes.values())


def _without_rope(monkeypatch):
    """The committed table less its rope rows: every kernel of it is measured on the H100 now
    (a script that gave no row says so in its row: tests/bench/h100/test_failed_scripts.py)."""
    rows = {k: r for k, r in fidelity._rows_by_key("liger-kernel-ci").items() if k[0] != "rope"}
    monkeypatch.setattr(fidelity, "_rows_by_key", lambda slug: rows)


def test_a_kernel_not_measured_is_checked_and_says_so(db, monkeypatch):
    _without_rope(monkeypatch)
    run = ci_run("rope", "liger", "forward", "latency")
    out = decide(run, device_bound(0.385536))
    assert out.level == Evidence.CHECKED
    assert out.facts["why"].startswith("fidelity not measured")
    assert out.facts["withheld"]["level"] == Evidence.REPRODUCED
    assert out.facts["fidelity"]["url"] == "/sources/liger-kernel-ci/fidelity/"
    assert out.facts["fidelity"]["reason"].startswith("the runner has not been run beside")


def test_a_source_without_a_table_is_not_measured(db):
    run = RunFactory(median=385_536)  # liger-kernel-bench: no table committed
    out = decide(run, device_bound(0.385536))
    assert out.level == Evidence.CHECKED
    assert out.facts["fidelity"] == {
        "status": fidelity.NOT_MEASURED,
        "reason": out.facts["fidelity"]["reason"],
        "url": "/sources/liger-kernel-bench/fidelity/",
        "gpu": "",
        "date": "",
    }


def test_a_row_not_established_is_checked_with_its_reason(db, monkeypatch):
    key = ("cross_entropy", "huggingface", "forward", "latency")
    row = {
        "status": fidelity.NOT_ESTABLISHED,
        "reason": "device-bound runner/script 1.200 (range 1.100-1.300)",
        "gpu": "NVIDIA H100 80GB HBM3",
        "date": "2026-12-05",
    }
    monkeypatch.setattr(fidelity, "_rows_by_key", lambda slug: {key: row})
    out = decide(ci_run(*key), device_bound(0.385536))
    assert out.level == Evidence.CHECKED
    assert out.facts["why"].startswith("fidelity not established")
    assert "1.200 (range 1.100-1.300)" in out.facts["why"]


def test_a_verdict_shows_its_fidelity_row_on_the_run_page(db, client):
    run = ci_run("rope", "liger", "full", "latency")  # not established at 1fdb668
    evidence.evidence_apply(
        run=run, controlled_run=None, outcome=decide(run, device_bound(0.385536)), cause="test"
    )
    html = client.get(run.get_absolute_url()).content.decode()
    assert 'href="/sources/liger-kernel-ci/fidelity/#rope-full-latency-liger"' in html
    assert "fidelity not established" in html


def test_a_peak_of_the_earlier_protocol_says_so_on_the_run_page(db, client):
    run = ci_run("geglu", "liger", "full", "memory")
    outcome = decide(run, peak(PEAK_MIB, protocol=None))
    evidence.evidence_apply(run=run, controlled_run=None, outcome=outcome, cause="test")
    html = client.get(run.get_absolute_url()).content.decode()
    assert "peak memory read by the runner&#x27;s earlier protocol" in html
    assert 'href="/sources/liger-kernel-ci/fidelity/#geglu-full-memory-liger"' in html
    assert "not the earlier one this result was measured with" in html


@pytest.fixture
def keys(settings):
    settings.KERNELINDEX_WORKER_KEYS = TEST_KEYS


def _record_memory(run, protocol, monkeypatch):
    """A peak-memory result recorded as the rule before the gate did (gate off)."""
    job = job_for(run)
    envelope = double_result(job)
    payload = envelope["payload"]
    payload["device"] = "cuda"
    payload["environment"]["gpuName"] = "NVIDIA H100 80GB HBM3"
    payload["environment"]["allocatedAtStartBytes"] = 0
    # As kirunner records a peak (bench/fidelity/h100-2026-12-05/runner-c/memory-dyt/).
    payload["measurement"] = {
        **peak(PEAK_MIB, protocol),
        "metric": "memory",
        "timer": "cuda_max_memory_allocated",
        "quantiles": [0.5, 0.2, 0.8],
        "values": [PEAK_MIB] * 3,
        "p20": PEAK_MIB,
        "p80": PEAK_MIB,
        "samples": [PEAK_MIB] * 10,
        "iterations": 10,
    }
    with monkeypatch.context() as m:
        m.setattr(evidence, "_fidelity_gate", lambda run, meas, impl, outcome: outcome)
        result_record(envelope=sign(json.loads(json.dumps(envelope))))
    run.refresh_from_db()
    return run


@pytest.mark.parametrize(
    "protocol,level", [(None, Evidence.CHECKED), ("upstream-resident", Evidence.REPRODUCED)]
)
def test_rejudging_applies_the_gate(db, keys, monkeypatch, protocol, level):
    run = _record_memory(ci_run("geglu", "liger", "full", "memory"), protocol, monkeypatch)
    assert run.evidence == Evidence.REPRODUCED
    assert run.pk in rejudge_candidates()
    assert run_rejudge(run=run) == level
    latest = EvidenceEvent.objects.latest_for(run)
    assert latest.cause.startswith("rejudge:")
    assert latest.facts["ruleVersion"] == evidence.RULE_VERSION
    assert latest.facts["fidelity"]["url"].endswith("#geglu-full-memory-liger")
    events = EvidenceEvent.objects.count()
    assert run_rejudge(run=run) == "skipped"
    assert EvidenceEvent.objects.count() == events


def test_a_run_rejudged_by_an_older_rule_is_replayed(db, keys, monkeypatch):
    run = _record_memory(ci_run("geglu", "liger", "full", "memory"), None, monkeypatch)
    EvidenceEvent.objects.create(
        run=run,
        from_level=run.evidence,
        to_level=run.evidence,
        outcome=run.evidence,
        cause="rejudge:older",
        facts={"why": "an older rule"},
    )
    assert run_rejudge(run=run) == Evidence.CHECKED


def test_a_table_that_establishes_a_withheld_row_gives_the_run_its_verdict(db, keys, monkeypatch):
    """A fidelity table committed after a run was left `checked` reaches it through
    re-judging, and only then: the same table twice replays nothing."""
    run = _record_memory(
        ci_run("geglu", "liger", "full", "memory"), "upstream-resident", monkeypatch
    )
    row = {"reason": "beside the script", "url": "/sources/liger-kernel-ci/fidelity/"}
    monkeypatch.setattr(
        fidelity, "fidelity_of", lambda **_: fidelity.Fidelity(fidelity.NOT_MEASURED, **row)
    )
    assert run_rejudge(run=run) == Evidence.CHECKED
    assert run.pk in rejudge_candidates()
    assert run_rejudge(run=run) == "skipped"
    monkeypatch.setattr(
        fidelity, "fidelity_of", lambda **_: fidelity.Fidelity(fidelity.ESTABLISHED, **row)
    )
    assert run_rejudge(run=run) == Evidence.REPRODUCED
    assert run_rejudge(run=run) == "skipped"


def test_the_committed_table_is_what_compare_py_gives():
    """No figure in data/fidelity is typed by hand: compare.py recomputes it from the
    outputs under bench/fidelity."""
    spec = importlib.util.spec_from_file_location("compare", REPO / "bench/fidelity/compare.py")
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    committed = json.loads((REPO / "data/fidelity/liger-kernel-ci.json").read_text())
    batch = Path(committed["batch"])
    csvs = sorted((REPO / "data/liger-ci").rglob("*.csv"))
    assert json.loads(json.dumps(compare.table(batch, "liger-kernel-ci", csvs))) == committed
    anchors = [r["anchor"] for r in committed["rows"]]
    assert len(anchors) == len(set(anchors))
    assert all(
        r["anchor"] == fidelity.anchor(r["kernel"], r["pass"], r["metric"], r["provider"])
        for r in committed["rows"]
    )


def test_rejudging_a_real_batch_withholds_exactly_what_the_table_does_not_establish(
    db, monkeypatch
):
    """data/reruns/h200-2026-11-30 loaded by the rule before the gate, then re-judged: the
    levels move only from a verdict to `checked`; every verdict left stands on a row the
    committed table gives as established; none rests on a peak of the earlier protocol."""
    from collections import Counter
    from io import StringIO

    from django.core.management import call_command

    from runs.models import Run
    from runs.sources.pipeline import ingest

    ingest(source_slug="liger-kernel-ci", locations=[str(REPO / "data/liger-ci/02bac05")])
    ingest(
        source_slug="liger-kernel-bench",
        locations=[str(REPO / "data/liger/all_benchmark_data.csv")],
    )
    batch = REPO / "data/reruns/h200-2026-11-30"
    with monkeypatch.context() as m:
        m.setattr(evidence, "_fidelity_gate", lambda run, meas, impl, outcome: outcome)
        call_command("rerun", "load-demo", str(batch), stdout=StringIO())
    originals = Run.objects.exclude(source__slug="kernelindex")
    before = dict(originals.values_list("pk", "evidence"))
    settled = (Evidence.REPRODUCED, Evidence.NOT_REPRODUCED)
    call_command("rerun", "rejudge", stdout=StringIO())
    after = dict(originals.values_list("pk", "evidence"))
    moved = Counter((before[pk], after[pk]) for pk in before if before[pk] != after[pk])
    assert moved, "the batch's old-protocol peaks alone must move"
    assert all(old in settled and new == Evidence.CHECKED for old, new in moved)
    established = {
        (r["kernel"], r["provider"], r["pass"], r["metric"])
        for r in TABLE_ROWS
        if r["status"] == fidelity.ESTABLISHED
    }
    memory_protocols = {
        (json.loads(p.read_text())["payload"]["measurement"].get("details") or {}).get("protocol")
        for p in batch.glob("results/*.json")
        if json.loads(p.read_text())["payload"]["metric"] == "memory"
    }
    assert "upstream-resident" not in memory_protocols
    for run in originals.filter(evidence__in=settled).select_related("benchmark", "implementation"):
        cell = (run.benchmark.slug, run.implementation.provider_key, run.timed_pass, run.metric)
        assert run.source.slug == "liger-kernel-ci" and cell in established, cell
        assert run.metric == "latency"
    withheld = originals.filter(pk__in=[pk for pk in before if before[pk] != after[pk]])
    for run in withheld:
        latest = EvidenceEvent.objects.latest_for(run)
        assert latest.facts["withheld"]["level"] in settled
        assert latest.facts["fidelity"]["url"].startswith(f"/sources/{run.source.slug}/fidelity/")
    print(f"\nh200-2026-11-30 re-judged: {dict(moved)}")

"""The one service that changes Run.evidence.

Evidence levels move only on a verified controlled rerun (PRODUCT.md, "Evidence levels").
Everything that writes the `evidence` column past a new run's `reported` lives in this module,
in one call per verified result (evidence_apply): the level of the controlled run the result
became, and the move of the original run's level with its EvidenceEvent, in one transaction. tests/runs/test_evidence.py scans the code base for any
other writer, and tries the admin.

The rule, given a verified controlled result for a run (docs/evidence.md has the table):
1. Its correctness check failed (the runner's float64 criterion): judged by the tolerance
   upstream's own test sets for the kernel and dtype at the row's commit, allowing the cell's
   reference implementation its own float64 error where a rerun of it recorded one
   (runs/evidence_correctness.py). Outside it: `incorrect`; within it: the check does not stop
   the verdict, and the rules below apply; where the recorded errors cannot tell, `NoVerdict`.
   Where upstream has no test for the kernel and dtype, the runner's own criterion stands:
   `incorrect`, but where it missed its bound by at most CHECK_EDGE times and another runner
   process passed the same run's check on a GPU, `checked` (the check sits at its tolerance's
   edge for this cell). The float64 errors are recorded either way (`accuracy`).
2. A CPU result, or a GPU of another product (e.g. an H200 for an H100 run): `checked`, with
   the device time it measured when it has one ("measured on another GPU product"); the
   checks below concern a timing verdict, which another product never gives.
3. Same product, and the result cannot carry a verdict: the GPU clocks throttled, the
   device-time repeats disagree, the peak memory counts an earlier job's tensors, or the
   published median is not positive. `NoVerdict`: the job fails with the reason, no level
   moves, and it can be re-run.
4. Same product, memory: the rerun's peak within the cell's tolerance: `reproduced`, else
   `not-reproduced`.
5. Same product, latency, by how the runner classified its own `do_bench` figure
   (kirunner.diagnose.classify, recomputed here from the recorded numbers):
   - device-bound: `do_bench` median against the published median, within the cell's
     tolerance: `reproduced`, else `not-reproduced`; where other runner processes timed the
     same run device-bound, their median is judged, not the last process's figure (processes
     further apart than device-time repeats may spread: `checked`); a cell whose upstream spread exceeds
     TOLERANCE_CEILING can be neither confirmed nor refuted: `checked`;
   - host-bound (or unexplained): the `do_bench` figure timed our host, so it proves nothing
     about the published one. A published median faster than the GPU's cold device time by
     more than the tolerance is `not-reproduced` ("faster than the GPU can run this call");
     otherwise `checked`, with "host-bound on our runner: device time X, host enqueue Y";
   - no device time recorded (results of runners before these diagnostics): `checked`.
   A cell timed power-capped is judged against the larger of its tolerance and the spread we
   see for its class across processes and days (runs/evidence_power.py); a device-bound
   do_bench figure of fewer than a handful of samples needs independent processes to agree,
   or rests on the device time, else `checked` (runs/evidence_samples.py).
6. Fidelity (runs/fidelity/): a `reproduced` or `not-reproduced` stands only where the
   runner is proven to measure what the source's own script measures. A peak memory read
   without the protocol upstream's `_test_memory` uses (`details.protocol` is not
   "upstream-resident") is `checked`: that earlier protocol read 322-338 MiB below the script
   on geglu and swiglu and twice it on DyT torch_compile; so is a DyT torch_compile result
   with no note of the script's compile state (the runner before it compiled or ran eager
   each cell as the script's process does). A kernel, provider, pass and metric
   whose fidelity the source's table gives as not established, or does not give (not
   measured), is `checked` too, with the reason and the link to its row; the verdict the
   figures would have given is kept in the facts (`withheld`).
A `checked` outcome does not overwrite `reproduced` or `not-reproduced`: those already say the
implementation was re-run and checked, and a correctness check says nothing about speed. The
exception is a `checked` because independent processes now disagree about the timing
(`Outcome.unsettles`): the earlier verdict rested on one of them.

Beside the level, a same-product latency result whose cold device time is a small fraction of
the published median records `hostDominatedFactor`: the page says the source's benchmark host
dominated the published figure. It labels the run; it never edits the published number.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from django.db import transaction

from kirunner import diagnose
from runs import evidence_correctness, evidence_power, evidence_samples
from runs.fidelity import table as fidelity
from runs.models import Evidence, EvidenceEvent, Run
from runs.signals import evidence_moved

# The last-resort tolerance per metric, when neither the run's cell nor its class has enough
# upstream observations: the p95 of how far a cell moves between Liger's own CI runs, over
# all cells, rounded up (bench/tolerance.py prints it; docs/evidence.md explains the choice).
TOLERANCE = {"latency": 0.35, "memory": 0.01}
TOLERANCE_RULE = "p95 of upstream CI run-to-run deviation, rounded up (docs/evidence.md)"
# Per-cell and per-class tolerances, written by `python bench/tolerance.py --write`.
TOLERANCE_TABLE = Path(__file__).resolve().parent.parent / "data" / "tolerance" / "liger-ci.json"
# Sources whose rows the table's cells describe (the same upstream project and protocol).
TABLE_SOURCES = {"liger-kernel-ci", "liger-kernel-bench"}
# A failed check whose worst element missed its bound by at most this factor, where another
# process passed the run's check, is at the tolerance's edge (rule 1); a real fault misses by
# orders of magnitude or gives NaN.
CHECK_EDGE = 2.0
# A cell whose own upstream figures spread by more than this cannot be confirmed or refuted:
# "reproduced within 128 %" would mean nothing.
TOLERANCE_CEILING = 0.50
# Published median this many times the GPU's cold device time: the source's host dominated it.
HOST_DOMINATED_FACTOR = 3.0

# The peak-memory protocol proven equal to upstream's _test_memory (bench/fidelity/README.md);
# a reading recorded without it gets no verdict (rule 6).
MEMORY_PROTOCOL = "upstream-resident"
# Written into every event's facts: re-judging (reruns.services.run_rejudge) replays a run
# whose newest re-judged event was decided by an older rule.
RULE_VERSION = "2026-12-07 script cell"

# Result units -> the run's integer units (ns, bytes).
UNIT_SCALE = {"ms": 1e6, "us": 1e3, "ns": 1.0, "MiB": 2**20, "B": 1.0}


@dataclass(frozen=True)
class Outcome:
    """What one controlled result says about the run it re-measured."""

    level: str
    facts: dict = field(default_factory=dict)
    # A `checked` that unsettles an earlier timing verdict: independent processes of the
    # runner now disagree about the run, so what one of them said no longer stands.
    unsettles: bool = False


class NoVerdict(Exception):
    """The result is verified but cannot carry a verdict; the job fails with this reason."""


@dataclass(frozen=True)
class Tolerance:
    value: float
    source: str  # "cell", "class" or "global"
    detail: str


@lru_cache(maxsize=1)
def _table() -> dict:
    try:
        return json.loads(TOLERANCE_TABLE.read_text())
    except FileNotFoundError:
        return {"cells": {}, "classes": {}}


def tolerance_for(run: Run) -> Tolerance:
    """The run's cell's own tolerance, else its class's, else the metric's (module docstring)."""
    return cell_tolerance(
        source_slug=run.source.slug,
        cell=(
            run.benchmark.slug,
            run.timed_pass,
            run.metric,
            run.implementation.provider_key,
            run.workload.slug,
            run.environment.gpu.upstream_name,
        ),
    )


def cell_tolerance(*, source_slug: str, cell: tuple[str, ...]) -> Tolerance:
    """tolerance_for by the cell's names (benchmark, pass, metric, provider, workload slug,
    GPU), for readers that hold names rather than a run (runs.changes)."""
    bench, timed_pass, metric, provider, workload_slug, gpu = cell
    if source_slug in TABLE_SOURCES:
        table = _table()
        key = "|".join((bench, timed_pass, metric, provider, workload_slug, gpu))
        if key in table["cells"]:
            value, n = table["cells"][key]
            return Tolerance(value, "cell", f"this cell's own spread across {n} upstream CI runs")
        klass = "|".join((bench, provider, gpu, metric))
        if klass in table["classes"]:
            value, n = table["classes"][klass]
            return Tolerance(
                value,
                "class",
                f"the spread of {bench} / {provider} / {gpu} cells across upstream CI runs "
                f"({n} observations; this cell has too few of its own)",
            )
    return Tolerance(TOLERANCE[metric], "global", f"all upstream {metric} cells ({TOLERANCE_RULE})")


def _us(ns: float) -> str:
    return f"{ns / 1e3:.1f} µs"


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _latency_diagnostics(measurement: dict) -> dict | None:
    """The runner's diagnostics, re-judged here with the one rule (kirunner.diagnose)."""
    diagnostics = measurement.get("diagnostics") or {}
    host = (diagnostics.get("hostEnqueue") or {}).get("median")
    flush = (diagnostics.get("flush") or {}).get("median")
    device = diagnostics.get("device") or {}
    median = measurement.get("median")
    if not all(_number(v) for v in (host, flush, device.get("median"), median)):
        return None
    if device["median"] <= 0:
        return None
    cls = diagnose.classify(
        do_bench_ms=median, device_ms=device["median"], host_enqueue_ms=host, flush_ms=flush
    )
    cls["deviceMethod"] = device.get("method")
    return cls


def outcome_decide(
    *,
    run: Run,
    correctness_passed: bool,
    device: str,
    gpu_product: str | None,
    measurement: dict | None,
    environment: dict | None = None,
    process: str | None = None,
    check_worst: float | None = None,
    checks: list | None = None,
    dtype: str | None = None,
    implementation: dict | None = None,
) -> Outcome:
    """Apply the rule above; `facts` records every input it used, for the event.
    `check_worst`: a failed check's largest error over its bound (None: not finite, or not
    given). `checks`: the result's checked tensors (kirunner.check), `dtype` its workload's;
    `implementation` the result's record of what ran (its notes, rule 6)."""
    original_product = run.environment.gpu.product
    measurement = measurement or {}
    facts: dict = {
        "correctnessPassed": correctness_passed,
        "device": device,
        "gpuProduct": gpu_product,
        "originalGpuProduct": original_product,
        "metric": run.metric,
        "process": process,
        "ruleVersion": RULE_VERSION,
    }
    if checks is not None:
        facts["accuracy"] = evidence_correctness.accuracy(checks)
    if not correctness_passed:
        upstream = _upstream_check(run, checks, dtype)
        if upstream is None:
            return _check_failed(run, check_worst, facts)
        facts["upstreamCheck"] = upstream.facts()
        if upstream.state == evidence_correctness.OUTSIDE:
            facts.update(checkWorst=check_worst, why=upstream.why())
            return Outcome(Evidence.INCORRECT, facts)
        if upstream.state == evidence_correctness.UNDECIDED:
            raise NoVerdict(upstream.why())
        missed = f" by up to {check_worst:.3g} times" if check_worst is not None else ""
        facts["checkNote"] = (
            f"the runner's float64 criterion was missed{missed}, but {upstream.why()}"
        )
    if device != "cuda" or gpu_product is None:
        facts["why"] = "a CPU result can check correctness but never reproduce a GPU run"
        return Outcome(Evidence.CHECKED, facts)
    measured = _measured_ns(run, measurement)
    facts.update(measured=measured, published=run.median, runUnit=run.unit)
    if gpu_product != original_product:
        return _another_product(run, measurement, gpu_product, facts)
    if run.metric == "memory":
        _memory_readable(measurement, environment)
        outcome = _verdict(run, measured, measurement, None, facts)
    else:
        cls = _latency_readable(run, measurement, facts)
        outcome = _verdict(run, measured, measurement, cls, facts)
    return _fidelity_gate(run, measurement, implementation, outcome)


def _earlier_harness(run: Run, measurement: dict, implementation: dict | None) -> str:
    """Why the result was measured by a harness older than the one the fidelity table
    establishes (bench/fidelity/README.md), or "" where it was not."""
    if run.metric == "memory":
        if (measurement.get("details") or {}).get("protocol") != MEMORY_PROTOCOL:
            return (
                "peak memory read by the runner's earlier protocol, not as upstream's "
                "_test_memory reads it (module, inputs and library workspaces resident): "
                "beside upstream's script that protocol read 322-338 MiB low on geglu "
                "and swiglu and twice the figure on DyT torch_compile, so this reading "
                "neither confirms nor refutes the published peak"
            )
        return ""
    notes = (implementation or {}).get("notes") or []
    compiled_dyt = run.benchmark.slug.startswith("dyt") and (
        run.implementation.provider_key == "torch_compile"
    )
    if compiled_dyt and not any("script" in str(note) for note in notes):
        return (
            "DyT torch_compile timed by the runner before it compiled or ran eager each cell "
            "as the script's process does (the result records no such note): beside the "
            "script that runner read 0.32-5.43 times its figure on device-bound cells, so "
            "this figure neither confirms nor refutes the published one"
        )
    return ""


def run_fidelity(run: Run) -> fidelity.Fidelity:
    """The fidelity table's row for the run's kernel, provider, pass and metric, as committed
    now (an event's facts keep the row its verdict was gated on)."""
    return fidelity.fidelity_of(
        source_slug=run.source.slug,
        kernel=run.benchmark.slug,
        provider=run.implementation.provider_key,
        timed_pass=run.timed_pass,
        metric=run.metric,
        commit=run.publication.upstream_commit if run.publication_id else None,
    )


def _fidelity_gate(
    run: Run, measurement: dict, implementation: dict | None, outcome: Outcome
) -> Outcome:
    """Rule 6: a timing or memory verdict only where the runner's fidelity to the source's
    own script is established for the kernel, provider, pass and metric (runs/fidelity/),
    and a peak memory only as upstream's _test_memory reads it."""
    if outcome.level not in (Evidence.REPRODUCED, Evidence.NOT_REPRODUCED):
        return outcome
    found = run_fidelity(run)
    facts = {**outcome.facts, "fidelity": found.facts()}
    withheld = {"level": outcome.level, "why": facts.get("why", "")}
    earlier = _earlier_harness(run, measurement, implementation)
    if earlier:
        facts.update(withheld=withheld, earlierHarness=True, why=earlier)
        return Outcome(Evidence.CHECKED, facts)
    if found.status == fidelity.ESTABLISHED:
        if disagree := _script_disagrees(run, outcome, facts):
            facts.update(withheld=withheld, why=disagree)
            return Outcome(Evidence.CHECKED, facts)
        return Outcome(outcome.level, facts, outcome.unsettles)
    figure = "peak-memory" if run.metric == "memory" else "latency"
    if found.status == fidelity.NOT_MEASURED:
        why = (
            f"fidelity not measured: {found.reason}, so a {figure} verdict could blame the "
            "kernel for a difference between the two harnesses"
        )
    else:
        why = (
            "fidelity not established: beside the source's own script the runner measured "
            f"{found.reason}, so its {figure} figure neither confirms nor refutes the "
            "published one"
        )
    facts.update(withheld=withheld, why=why)
    return Outcome(Evidence.CHECKED, facts)


def _script_disagrees(run: Run, outcome: Outcome, facts: dict) -> str:
    """Rule 6 on the cell itself: where upstream's own script measured this very cell on the
    same GPU product at the row's commit, a verdict stands only where the script's figure,
    held to the same tolerance, gives the same one. Where they part, the two harnesses
    disagree on this cell, and the published figure is neither confirmed nor refuted. Returns
    the reason, or "" where the script agrees or did not measure the cell."""
    tolerance = outcome.facts.get("tolerance")
    cell = fidelity.script_cell(
        source_slug=run.source.slug,
        commit=run.publication.upstream_commit if run.publication_id else None,
        gpu=run.environment.gpu.upstream_name,
        kernel=run.benchmark.slug,
        provider=run.implementation.provider_key,
        timed_pass=run.timed_pass,
        metric=run.metric,
        workload=run.workload.slug,
    )
    if cell is None or tolerance is None or not run.median:
        return ""
    deviation = abs(cell.figure - run.median) / run.median
    script_level = Evidence.REPRODUCED if deviation <= tolerance else Evidence.NOT_REPRODUCED
    facts["scriptCell"] = {
        "figure": cell.figure,
        "deviation": round(deviation, 6),
        "commit": cell.commit,
        "calls": list(cell.calls),
        "level": script_level,
    }
    if script_level == outcome.level:
        return ""
    figure = "published peak" if run.metric == "memory" else "published median"
    side = "within" if script_level == Evidence.REPRODUCED else "outside"
    off = evidence_samples.percent_apart(deviation, tolerance)
    return (
        f"upstream's own script measured this cell on the {cell.gpu} {off} off the {figure}, "
        f"{side} the {tolerance:.0%} tolerance, where the runner measured "
        f"{evidence_samples.percent_apart(facts.get('deviation', 0), tolerance)} off: on this "
        "cell the two harnesses disagree, so neither confirms nor refutes the published figure"
    )


def _upstream_check(
    run: Run, checks: list | None, dtype: str | None
) -> evidence_correctness.Judged | None:
    """Rule 1: the failed check's tensors against upstream's test tolerance for the kernel and
    dtype at the row's commit; None where upstream sets none (or no tensors were recorded)."""
    if not checks:
        return None
    dtype = dtype or (run.workload.parameters or {}).get("dtype")
    commit = run.publication.upstream_commit if run.publication_id else None
    tolerance = evidence_correctness.upstream_tolerance(run.benchmark.slug, dtype, commit)
    if tolerance is None:
        return None
    reference = evidence_correctness.Reference.of(EvidenceEvent.objects.reference_accuracies(run))
    is_reference = not (run.implementation.provider_key or "").startswith("liger")
    return evidence_correctness.judge(
        checks, tolerance, reference, dtype, is_reference=is_reference
    )


def _check_failed(run: Run, worst: float | None, facts: dict) -> Outcome:
    """Rule 1. A check that misses its bound narrowly in one process and passes in another
    (the same implementation and criterion, other random inputs) sits at its tolerance's edge
    for the cell: on the lent H200 the bf16 weight gradients of kto_loss and dpo_loss missed by
    1.18 to 1.38 times the bound in one process and passed in the next, Transformers' eager
    implementation among them. That says nothing certain of the implementation, so it is
    `checked`, and it leaves a timing verdict standing (the check says nothing of speed). A
    wide miss, or a NaN, is a wrong result on those inputs whatever other inputs gave."""
    facts["checkWorst"] = worst
    missed = (
        "with a NaN, an Inf or a mismatched shape" if worst is None else f"by {worst:.3g} times"
    )
    own = (
        f"the output missed the runner's float64 criterion {missed}; no upstream test at this "
        "row's commit sets a tolerance for this kernel and dtype, so that criterion stands"
    )
    if worst is None or worst > CHECK_EDGE:
        return Outcome(Evidence.INCORRECT, {**facts, "why": own})
    passed = evidence_samples.other_checks_passed(run, facts.get("process"))
    if not passed:
        return Outcome(Evidence.INCORRECT, {**facts, "why": own})
    facts.update(
        checksPassedElsewhere=passed,
        why=(
            f"the correctness check missed its bound by {worst:.2f} times in this process "
            f"and passed in {passed} other process{'es' if passed > 1 else ''} on other "
            "random inputs: it sits at its tolerance's edge here, so neither says the "
            "implementation is wrong"
        ),
    )
    return Outcome(Evidence.CHECKED, facts)


def _measured_ns(run: Run, measurement: dict) -> float:
    """The result's median in the run's unit (rule 3: NoVerdict when either side is missing)."""
    median, unit = measurement.get("median"), measurement.get("unit")
    if not _number(median) or unit not in UNIT_SCALE:
        raise NoVerdict(f"a GPU result needs a numeric median with a known unit, got {unit!r}")
    if not run.median or run.median <= 0:
        raise NoVerdict(f"the published median ({run.median}) is not positive: nothing to compare")
    return median * UNIT_SCALE[unit]


def _another_product(run: Run, measurement: dict, gpu_product: str, facts: dict) -> Outcome:
    """Rule 2: another GPU product checks correctness, with the device time it measured."""
    facts["why"] = "another GPU product: correctness checked, the timing is not comparable"
    cls = _latency_diagnostics(measurement) if run.metric == "latency" else None
    if cls is not None:
        facts["classification"] = cls
        facts["deviceNs"] = cls["deviceMs"] * 1e6
        facts["why"] = (
            f"measured on another GPU product: {gpu_product} device time "
            f"{_us(facts['deviceNs'])}; correctness checked, the timing is not comparable"
        )
    return Outcome(Evidence.CHECKED, facts)


def _memory_readable(measurement: dict, environment: dict | None) -> None:
    """Rule 3 for memory: a peak that counts an earlier job's tensors is no verdict."""
    start = (environment or {}).get("allocatedAtStartBytes") or 0
    subtracted = (measurement.get("details") or {}).get("baselineBytes")
    if _number(start) and start > 0 and not subtracted:
        raise NoVerdict(
            f"the runner process held {start / 2**20:.0f} MiB from an earlier job when this "
            "one started; the peak counts it, so the reading is not this job's"
        )


def _latency_readable(run: Run, measurement: dict, facts: dict) -> dict | None:
    """Rule 3 for latency (throttled clocks, disagreeing device-time repeats: NoVerdict), then
    the runner's classification of its figure, or None when it recorded no device time."""
    diagnostics = measurement.get("diagnostics") or {}
    clocks = diagnostics.get("clocks")
    throttle = diagnose.throttled(clocks if isinstance(clocks, dict) else None)
    if throttle:
        raise NoVerdict(f"the GPU clocks were throttled ({', '.join(throttle)})")
    spread = diagnostics.get("device") or {}
    if _number(spread.get("median")) and not diagnose.repeats_consistent(spread):
        shown = ", ".join(
            f"{name} {spread[name]:.4g} ms" if _number(spread.get(name)) else f"no {name}"
            for name in ("p20", "median", "p80")
        )
        raise NoVerdict(
            "the device-time repeats disagree beyond their spread "
            f"({shown}; limit {diagnose.REPEAT_SPREAD_LIMIT:.0%} of the median)"
        )
    cls = _latency_diagnostics(measurement)
    if cls is not None:
        facts["classification"] = cls
        device_ns = cls["deviceMs"] * 1e6
        facts["deviceNs"] = device_ns
        factor = run.median / device_ns
        if factor >= HOST_DOMINATED_FACTOR:
            facts["hostDominatedFactor"] = round(factor, 2)
    return cls


def _verdict(
    run: Run, measured: float, measurement: dict, cls: dict | None, facts: dict
) -> Outcome:
    """Rules 4 and 5: the same product's figure against the published one, within the cell's
    tolerance (widened for a power-capped latency cell)."""
    tolerance = tolerance_for(run)
    if run.metric == "latency":
        tolerance = _power_capped(run, measurement, tolerance, facts)
    facts.update(
        tolerance=tolerance.value,
        toleranceSource=tolerance.source,
        toleranceDetail=tolerance.detail,
        rule=TOLERANCE_RULE,
    )
    deviation = abs(measured - run.median) / run.median
    facts["deviation"] = round(deviation, 6)
    samples = [s for s in measurement.get("samples") or [] if _number(s)]
    few = run.metric == "latency" and len(samples) < evidence_samples.FEW_SAMPLES
    elsewhere = cls is None and few and _device_bound_elsewhere(run, facts)
    if run.metric == "latency" and not elsewhere and (cls is None or cls["kind"] != "device-bound"):
        return _not_device_bound(run, cls, tolerance, facts)
    if tolerance.value > TOLERANCE_CEILING:
        facts["why"] = (
            f"upstream's own figures for this cell spread by up to {tolerance.value:.0%} "
            f"({tolerance.detail}): too wide to confirm or refute"
        )
        return Outcome(Evidence.CHECKED, facts)
    if few:
        return _few_samples(run, measured, tolerance, len(samples), cls, measurement, facts)
    spread = ""
    if run.metric == "latency":
        deviation, spread = _across_processes(run, measured, tolerance.value, facts)
    off = evidence_samples.percent_apart(deviation, tolerance.value)
    if spread == "disagree":
        facts["why"] = (
            f"independent processes disagree: {_figures(facts)}, "
            f"{facts['processesSpread']:.0%} apart, more than the "
            f"{diagnose.REPEAT_SPREAD_LIMIT:.0%} a repeated figure may spread, so the timing "
            "is neither confirmed nor refuted"
        )
        return Outcome(Evidence.CHECKED, facts, unsettles=True)
    figure = "published peak" if run.metric == "memory" else "published median"
    if deviation <= tolerance.value:
        facts["why"] = f"within {tolerance.value:.0%} of the {figure} ({off} off){spread}"
        return Outcome(Evidence.REPRODUCED, facts)
    facts["why"] = f"{off} off the {figure}, outside the {tolerance.value:.0%} tolerance{spread}"
    return Outcome(Evidence.NOT_REPRODUCED, facts)


def _across_processes(
    run: Run, measured: float, tolerance: float, facts: dict
) -> tuple[float, str]:
    """A device-bound figure that several independent runner processes timed: the verdict is
    judged on their median, so a cell near its tolerance does not flip with whichever process
    was recorded last; where they spread more than repeats of one figure may (the device-time
    repeats' limit), no verdict stands. Returns the deviation judged and the clause that says
    so: "" for one process, "disagree" for processes too far apart."""
    others = evidence_samples.other_processes(
        run, facts.get("process"), run.metric, device_bound=True
    )
    if not others:
        return facts["deviation"], ""
    figures = [measured, *others]
    judged = statistics.median(figures)
    deviation = abs(judged - run.median) / run.median
    inside = sum(abs(f - run.median) / run.median <= tolerance for f in figures)
    facts.update(
        processes=len(figures),
        processFigures=figures,
        processesWithin=inside,
        processesSpread=round((max(figures) - min(figures)) / judged, 6),
        judged=judged,
        deviation=round(deviation, 6),
    )
    if facts["processesSpread"] > diagnose.REPEAT_SPREAD_LIMIT:
        return deviation, "disagree"
    clause = f"; the median of {len(figures)} independent processes ({_figures(facts)})"
    if 0 < inside < len(figures):
        clause += f", {inside} of them within the tolerance on its own"
    return deviation, clause


def _figures(facts: dict) -> str:
    return ", ".join(_us(f) for f in facts["processFigures"])


def _device_bound_elsewhere(run: Run, facts: dict) -> bool:
    """Whether another runner process timed this run device-bound. A result with no device
    time of such a cell is one more independent process for a few-sample verdict: it counts as
    it would had it been recorded before that process's (whose verdict weighs every earlier
    process's figure), so the verdict does not depend on the order the results arrive in."""
    return bool(
        evidence_samples.other_processes(run, facts.get("process"), run.metric, device_bound=True)
    )


def _not_device_bound(run: Run, cls: dict | None, tolerance: Tolerance, facts: dict) -> Outcome:
    """Rule 5 where our do_bench figure timed the host, or there is no device time to tell:
    only a published figure faster than the GPU's cold device time can be refuted."""
    if cls is None:
        facts["why"] = (
            "no device time was recorded with this result (a runner before host and device "
            "diagnostics, or they failed): do_bench alone cannot tell a slow host from a slow "
            "kernel, so the timing is neither confirmed nor refuted"
        )
        return Outcome(Evidence.CHECKED, facts)
    limit = min(tolerance.value, TOLERANCE_CEILING)
    if run.median < facts["deviceNs"] * (1 - limit):
        facts["why"] = (
            f"the published figure {_us(run.median)} is faster than the GPU can run this "
            f"call: device time {_us(facts['deviceNs'])} (more than {limit:.0%} below it)"
        )
        return Outcome(Evidence.NOT_REPRODUCED, facts)
    if cls["kind"] == "host-bound":
        facts["why"] = (
            f"host-bound on our runner: device time {_us(facts['deviceNs'])}, host enqueue "
            f"{cls['hostEnqueueMs'] * 1e3:.1f} µs; our do_bench figure timed the host, so "
            "it neither confirms nor refutes the published one"
        )
    else:
        facts["why"] = (
            f"unexplained on our runner: do_bench {cls['doBenchMs'] * 1e3:.1f} µs against "
            f"a device time of {_us(facts['deviceNs'])}, with the host enqueuing a call in "
            f"{cls['hostEnqueueMs'] * 1e3:.1f} µs; a figure we cannot explain neither "
            "confirms nor refutes the published one"
        )
    return Outcome(Evidence.CHECKED, facts)


def _power_capped(run: Run, measurement: dict, tolerance: Tolerance, facts: dict) -> Tolerance:
    """Widen the tolerance of a cell timed power-capped to its class's own spread
    (runs/evidence_power.py); the windows go into the facts either way."""
    windows = evidence_power.window_summary(measurement)
    if windows:
        facts["power"] = windows
    capped = evidence_power.capped_window(measurement)
    if capped is None:
        return tolerance
    facts["powerCapped"] = capped
    wider = evidence_power.capped_tolerance(run.benchmark.slug, run.implementation.provider_key)
    if wider is None or wider[0] <= tolerance.value:
        return tolerance
    return Tolerance(wider[0], "power-capped", f"{wider[1]}; upstream's: {tolerance.detail}")


def _few_samples(
    run: Run,
    measured: float,
    tolerance: Tolerance,
    samples: int,
    cls: dict,
    measurement: dict,
    facts: dict,
) -> Outcome:
    """A do_bench figure of fewer than FEW_SAMPLES samples (runs/evidence_samples), device-bound
    here or, with no device time (`cls` None), in another process."""
    device = (measurement.get("diagnostics") or {}).get("device") or {}
    others = evidence_samples.other_processes(run, facts.get("process"), run.metric)
    few = evidence_samples.judge(
        measured=measured,
        published=run.median,
        tolerance=tolerance.value,
        samples=samples,
        others=others,
        device=cls["deviceMs"] * 1e6 if cls else None,
        device_consistent=bool(cls) and diagnose.repeats_consistent(device),
    )
    why = few.why
    if cls is None:
        why += "; this process recorded no device time, another one timed the run device-bound"
    facts.update(fewSamples=samples, fewSamplesBasis=few.basis, why=why)
    # Processes that disagree unsettle a verdict one of them gave earlier.
    return Outcome(few.level, facts, unsettles=few.level == Evidence.CHECKED and bool(others))


def _next_level(current: str, outcome: Outcome) -> str:
    settled = current in (Evidence.REPRODUCED, Evidence.NOT_REPRODUCED)
    if outcome.level == Evidence.CHECKED and settled and not outcome.unsettles:
        return current
    return outcome.level


def evidence_apply(
    *,
    run: Run,
    controlled_run: Run | None,
    outcome: Outcome,
    cause: str,
    cause_job=None,
    start: str | None = None,
) -> EvidenceEvent:
    """Move `run` to the level `outcome` implies and append the EvidenceEvent that says why.

    `controlled_run` is the run of source kernelindex the result became (None for a CPU
    result, which is kept as a check but is no GPU measurement), created at `reported` by the
    pipeline in the caller's transaction as every new run is: it gets its own level,
    `controlled`, here, with the verdict it carries. Every application writes an event, also
    when the level stays, so the page can show each rerun's verdict.

    `start`: the level the outcome is applied to, where it is not the run's current one: a
    re-judging replays a run's results from `reported` (reruns.services.run_rejudge).
    """
    if outcome.level not in (
        Evidence.CHECKED,
        Evidence.REPRODUCED,
        Evidence.NOT_REPRODUCED,
        Evidence.INCORRECT,
    ):
        raise ValueError(f"{outcome.level!r} is not a controlled-rerun outcome")
    if run.source.slug == "kernelindex":
        raise ValueError("a controlled run's own level is `controlled` and does not move")
    if controlled_run is not None and controlled_run.source.slug != "kernelindex":
        raise ValueError(f"run {controlled_run.public_id} is no controlled run")
    # No savepoint of its own: called in a transaction, it is the caller's (a result recorded
    # in its own savepoint, a run re-judged in its own transaction) that rolls back with it.
    with transaction.atomic(savepoint=False):
        if controlled_run is not None:
            _controlled_level(controlled_run)
        # Lock the row: two results for the same run recorded at once must not both read the
        # same `from` level.
        locked = Run.objects.select_for_update().get(pk=run.pk)
        new_level = _next_level(start or locked.evidence, outcome)
        if new_level != locked.evidence:
            Run.objects.filter(pk=run.pk).update(evidence=new_level)
        event = EvidenceEvent.objects.create(
            run=locked,
            from_level=locked.evidence,
            to_level=new_level,
            outcome=outcome.level,
            cause=cause,
            cause_job=cause_job,
            controlled_run=controlled_run,
            facts=outcome.facts,
        )
        if new_level != event.from_level:
            # Watchers hear of a moved level once it is committed (runs.signals).
            transaction.on_commit(
                lambda: evidence_moved.send(sender=EvidenceEvent, event_id=event.pk)
            )
    run.evidence = new_level
    return event


def evidence_withdraw(*, run: Run, why: str, cause: str, cause_job=None) -> EvidenceEvent:
    """Withdraw every verdict of a run whose results, re-judged by the rule as it now stands,
    can carry none (each is NoVerdict): the run goes back to `reported`, the level no result
    moved, and an event says why (reruns.services.run_rejudge)."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        event = EvidenceEvent.objects.create(
            run=locked,
            from_level=locked.evidence,
            to_level=Evidence.REPORTED,
            outcome=Evidence.REPORTED,
            cause=cause,
            cause_job=cause_job,
            facts={"withdrawn": True, "why": why, "ruleVersion": RULE_VERSION},
        )
        if locked.evidence != Evidence.REPORTED:
            Run.objects.filter(pk=run.pk).update(evidence=Evidence.REPORTED)
            transaction.on_commit(
                lambda: evidence_moved.send(sender=EvidenceEvent, event_id=event.pk)
            )
    run.evidence = Evidence.REPORTED
    return event


def _controlled_level(controlled_run: Run) -> None:
    """A controlled run's first and only level, written once: with the verdict it carries."""
    Run.objects.filter(pk=controlled_run.pk).update(evidence=Evidence.CONTROLLED)
    controlled_run.evidence = Evidence.CONTROLLED

"""The one service that changes Run.evidence.

Evidence levels move only on a verified controlled rerun (PRODUCT.md, "Evidence levels").
Everything that writes the `evidence` column lives in this module: the level a controlled run
is created with, and every move of an original run's level, each written with its
EvidenceEvent in the same transaction. tests/test_evidence.py scans the code base for any
other writer, and tries the admin.

The rule, given a verified controlled result for a run:
1. Its correctness check failed: `incorrect`.
2. It ran on a GPU of the same product as the run's (e.g. "NVIDIA H100", whatever the form
   factor) and its median is within TOLERANCE[metric] of the run's: `reproduced`;
   outside it: `not-reproduced`.
3. Otherwise (another GPU product, or a CPU, which can never reproduce a GPU run): `checked`.
A `checked` outcome does not overwrite `reproduced` or `not-reproduced`: those already say the
implementation was re-run and checked, and a correctness check says nothing about speed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from runs.models import Evidence, EvidenceEvent, Run

# Relative deviation of the rerun's median from the published median that still counts as
# reproduced. Measured, not chosen: the p95 of how far the same cell moves between Liger's
# own CI runs on the same GPU, rounded up to a whole percent (bench/tolerance.py prints the
# distribution; docs/evidence.md quotes it and explains the choice).
TOLERANCE = {"latency": 0.35, "memory": 0.01}
TOLERANCE_RULE = "p95 of upstream CI run-to-run deviation, rounded up (docs/evidence.md)"

# Result units -> the run's integer units (ns, bytes).
UNIT_SCALE = {"ms": 1e6, "us": 1e3, "ns": 1.0, "MiB": 2**20, "B": 1.0}


@dataclass(frozen=True)
class Outcome:
    """What one controlled result says about the run it re-measured."""

    level: str
    facts: dict = field(default_factory=dict)


def outcome_decide(
    *,
    run: Run,
    correctness_passed: bool,
    device: str,
    gpu_product: str | None,
    median: float | None,
    unit: str | None,
) -> Outcome:
    """Apply the rule above; `facts` records every input it used, for the event."""
    original_product = run.environment.gpu.product
    facts: dict = {
        "correctnessPassed": correctness_passed,
        "device": device,
        "gpuProduct": gpu_product,
        "originalGpuProduct": original_product,
        "metric": run.metric,
    }
    if not correctness_passed:
        return Outcome(Evidence.INCORRECT, facts)
    if device != "cuda" or gpu_product is None:
        facts["why"] = "a CPU result can check correctness but never reproduce a GPU run"
        return Outcome(Evidence.CHECKED, facts)
    if gpu_product != original_product:
        facts["why"] = "another GPU product: correctness checked, the timing is not comparable"
        return Outcome(Evidence.CHECKED, facts)
    if median is None or unit not in UNIT_SCALE:
        raise ValueError(f"a same-product result needs a median with a known unit, got {unit!r}")
    measured = median * UNIT_SCALE[unit]
    deviation = abs(measured - run.median) / run.median
    tolerance = TOLERANCE[run.metric]
    facts.update(
        measured=measured,
        published=run.median,
        runUnit=run.unit,
        deviation=round(deviation, 6),
        tolerance=tolerance,
        rule=TOLERANCE_RULE,
    )
    level = Evidence.REPRODUCED if deviation <= tolerance else Evidence.NOT_REPRODUCED
    return Outcome(level, facts)


def _next_level(current: str, outcome: str) -> str:
    if outcome == Evidence.CHECKED and current in (Evidence.REPRODUCED, Evidence.NOT_REPRODUCED):
        return current
    return outcome


def evidence_apply(
    *, run: Run, controlled_run: Run | None, outcome: Outcome, cause: str, cause_job=None
) -> EvidenceEvent:
    """Move `run` to the level `outcome` implies and append the EvidenceEvent that says why.

    `controlled_run` is the run of source kernelindex the result became (None for a CPU
    result, which is kept as a check but is no GPU measurement). Every application writes an
    event, also when the level stays, so the page can show each rerun's verdict.
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
    with transaction.atomic():
        # Lock the row: two results for the same run recorded at once must not both read the
        # same `from` level.
        locked = Run.objects.select_for_update().get(pk=run.pk)
        new_level = _next_level(locked.evidence, outcome.level)
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
    run.evidence = new_level
    return event


def controlled_run_create(**fields) -> Run:
    """Create a run that KernelIndex measured itself: its level is `controlled`, always."""
    fields.pop("evidence", None)
    return Run.objects.create(**fields, evidence=Evidence.CONTROLLED)

"""The claim rule (runs/claims/rule.py), table-driven: holds, overstated, understated, reversed,
a published tie confirmed or broken (never reversed), the wall-clock basis with the device
time beside it, and the refusals (another GPU product, one side missing, two processes, too
wide, a side whose verdict the evidence rule withheld)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from runs.claims.rule import Judged, Refused, Side, judge

H200 = "NVIDIA H200"


def side(published, controlled, *, product=H200, rerun_on=H200, process="p1", tol=0.05,
         device_bound=True, device=None):  # fmt: skip
    return Side(
        published=published,
        published_product=product,
        tolerance=tol,
        controlled_product=rerun_on,
        process=process,
        do_bench=controlled,
        device=device if device is not None else controlled,
        device_bound=device_bound,
    )


# better = the lower published figure; published ratio = other / better.
CASES = [
    ("holds", side(394, 390), side(687, 690), "holds"),
    ("overstated: the gap is smaller", side(394, 390), side(687, 480), "overstated"),
    ("understated: the gap is larger", side(394, 300), side(687, 690), "understated"),
    # The cross_entropy case: 1.74x published, Transformers faster on our host.
    ("reversed", side(394, 389), side(687, 211), "reversed"),
    ("a near tie in the rerun is overstated, not reversed", side(394, 400), side(687, 395), "overstated"),
]  # fmt: skip


@pytest.mark.parametrize("name,better,other,verdict", CASES, ids=[c[0] for c in CASES])
def test_verdicts(name, better, other, verdict):
    out = judge(better, other, metric="latency", ceiling=0.5)
    assert isinstance(out, Judged) and out.verdict == verdict
    assert out.published_ratio == pytest.approx(687 / 394)
    assert out.tolerance == pytest.approx(1.05 * 1.05 - 1)
    assert out.basis == "wall clock"


REFUSALS = [
    ("published on two products", side(394, 390), side(687, 690, product="NVIDIA H100"), "different GPU products"),
    ("rerun on another product", side(394, 390, product="NVIDIA H100"), side(687, 690, product="NVIDIA H100"), "never judged across GPU products"),
    ("one side missing", side(394, 390), side(687, None, rerun_on=None, process=None), "no controlled rerun"),
    ("two processes", side(394, 390), side(687, 690, process="p2"), "same runner process"),
    ("too wide", side(394, 390, tol=0.6), side(687, 690), "too wide"),
    ("a side withheld by the fidelity rule", side(394, 390), replace(side(687, 690), withheld="fidelity not measured: x"), "carries no verdict: fidelity not measured"),
]  # fmt: skip


@pytest.mark.parametrize("name,better,other,why", REFUSALS, ids=[c[0] for c in REFUSALS])
def test_refusals(name, better, other, why):
    out = judge(better, other, metric="latency", ceiling=0.5)
    assert isinstance(out, Refused) and why in out.why


def test_a_latency_claim_is_judged_on_the_wall_clock_with_the_device_time_beside_it():
    """Upstream published wall-clock do_bench: a side whose do_bench timed our host is still
    judged on it; the device times' ratio is a second line that never decides."""
    better = side(394, 900, device=389, device_bound=False)  # do_bench timed our host
    out = judge(better, side(687, 690, device=211), metric="latency", ceiling=0.5,
                names=("Liger", "Transformers"))  # fmt: skip
    assert out.basis == "wall clock" and out.verdict == "reversed"
    assert out.controlled_ratio == pytest.approx(690 / 900)
    assert out.device_ratio == pytest.approx(211 / 389)
    assert "by wall clock: Transformers 1.30x faster" in out.why
    assert "by device time: Transformers 1.84x faster" in out.why


def test_device_time_may_disagree_with_the_wall_clock():
    """By device time Liger is 4x faster, by the wall clock on our host a tie: the verdict
    follows the wall clock, the basis the claim was published on."""
    better = side(100, 500, device=50, device_bound=False)
    other = side(400, 510, device=200, device_bound=False)
    out = judge(better, other, metric="latency", ceiling=0.5, names=("Liger", "Torch"))
    assert out.verdict == "overstated"
    assert "by wall clock: a tie (1.02x)" in out.why
    assert "by device time: Liger 4.00x faster" in out.why


TIES = [
    # published ratio within the combined tolerance (10.25 %) of 1: a tie claim
    ("confirmed", side(394, 390), side(410, 400), "tie-confirmed"),
    ("confirmed the other way round", side(394, 400), side(410, 380), "tie-confirmed"),
    ("broken by the claimed side", side(394, 300), side(410, 400), "tie-broken"),
    ("broken by the other side, never reversed", side(394, 520), side(410, 400), "tie-broken"),
]


@pytest.mark.parametrize("name,better,other,verdict", TIES, ids=[c[0] for c in TIES])
def test_a_published_tie_is_confirmed_or_broken(name, better, other, verdict):
    out = judge(better, other, metric="latency", ceiling=0.5, names=("A", "B"))
    assert isinstance(out, Judged) and out.verdict == verdict
    assert out.why.startswith("published: a tie of A and B (1.04x, within the tolerance of 1)")


def test_a_broken_tie_says_who_is_ahead_now():
    out = judge(side(394, 520), side(410, 400), metric="latency", ceiling=0.5, names=("A", "B"))
    assert "by wall clock: B 1.30x faster" in out.why


def test_a_ratio_just_outside_the_tie_is_an_ordered_claim():
    """1 + t exactly is still a tie; just beyond it the claim is an order and can reverse."""
    t = 1.05 * 1.05 - 1
    edge = judge(side(1000, 500), side(1000 * (1 + t), 450), metric="memory", ceiling=0.5)
    assert edge.verdict == "tie-broken"
    beyond = judge(side(1000, 500), side(1000 * (1 + t) * 1.01, 450), metric="memory", ceiling=0.5)
    assert beyond.verdict == "reversed"


def test_memory_compares_the_peaks():
    out = judge(side(100, 101), side(200, 150), metric="memory", ceiling=0.5)
    assert out.basis == "peak memory" and out.verdict == "overstated"


def test_the_why_shows_a_near_tie_with_a_third_decimal():
    """A published 1.002x reads as the tie it is, and a reversed claim names the side that
    won, in the claim's own words, so no reader inverts a ratio."""
    out = judge(side(500, 530, tol=0.01), side(501, 500, tol=0.01), metric="memory", ceiling=0.5,
                names=("A", "B"))  # fmt: skip
    assert isinstance(out, Judged) and out.verdict == "tie-broken"
    assert out.why.startswith("published: a tie of A and B (1.002x, within the tolerance of 1)")
    assert "by peak memory: B 1.06x less memory" in out.why
    wide = judge(side(394, 389), side(687, 211), metric="latency", ceiling=0.5,
                 names=("Liger", "Transformers"))  # fmt: skip
    assert wide.why.startswith("published: Liger 1.74x faster")
    assert "by wall clock: Transformers 1.84x faster" in wide.why


def test_a_side_whose_verdict_the_evidence_rule_withheld_carries_its_reason():
    """runs/claims/services reads each side from its event's facts: an event whose verdict
    rule 6 withheld (the runner's fidelity not established, an earlier memory protocol)
    makes a side that the rule refuses, with the event's reason."""
    from runs.claims.services import _side

    facts = {"measured": 690.0, "tolerance": 0.05, "gpuProduct": H200, "process": "p1"}
    withheld = {**facts, "withheld": {"level": "reproduced"}, "why": "fidelity not measured: x"}
    row = {"median": 687.0, "product": H200}
    kept = _side({**row, "facts": facts}, None)
    held = _side({**row, "facts": withheld}, None)
    assert kept.withheld == "" and held.withheld == "fidelity not measured: x"
    out = judge(side(394, 390), replace(held, process="p1"), metric="latency", ceiling=0.5)
    assert isinstance(out, Refused) and "fidelity not measured" in out.why

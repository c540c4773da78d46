"""The claim rule (runs/claims/rule.py), table-driven: holds, overstated, understated, reversed,
and the refusals (another GPU product, one side missing, two processes, too wide)."""

from __future__ import annotations

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
    ("a tie is overstated, not reversed", side(394, 400), side(687, 395), "overstated"),
]


@pytest.mark.parametrize("name,better,other,verdict", CASES, ids=[c[0] for c in CASES])
def test_verdicts(name, better, other, verdict):
    out = judge(better, other, metric="latency", ceiling=0.5)
    assert isinstance(out, Judged) and out.verdict == verdict
    assert out.published_ratio == pytest.approx(687 / 394)
    assert out.tolerance == pytest.approx(1.05 * 1.05 - 1)
    assert out.basis == "do_bench"


REFUSALS = [
    ("published on two products", side(394, 390), side(687, 690, product="NVIDIA H100"), "different GPU products"),
    ("rerun on another product", side(394, 390, product="NVIDIA H100"), side(687, 690, product="NVIDIA H100"), "never judged across GPU products"),
    ("one side missing", side(394, 390), side(687, None, rerun_on=None, process=None), "no controlled rerun"),
    ("two processes", side(394, 390), side(687, 690, process="p2"), "same runner process"),
    ("too wide", side(394, 390, tol=0.6), side(687, 690), "too wide"),
]  # fmt: skip


@pytest.mark.parametrize("name,better,other,why", REFUSALS, ids=[c[0] for c in REFUSALS])
def test_refusals(name, better, other, why):
    out = judge(better, other, metric="latency", ceiling=0.5)
    assert isinstance(out, Refused) and why in out.why


def test_host_bound_side_uses_the_device_time():
    better = side(394, 900, device=389, device_bound=False)  # do_bench timed our host
    out = judge(better, side(687, 690, device=211), metric="latency", ceiling=0.5)
    assert out.basis == "device time" and out.verdict == "reversed"
    assert out.controlled_ratio == pytest.approx(211 / 389)


def test_memory_compares_the_peaks():
    out = judge(side(100, 101), side(200, 150), metric="memory", ceiling=0.5)
    assert out.basis == "peak memory" and out.verdict == "overstated"


def test_the_why_shows_a_near_tie_with_a_third_decimal():
    """A published 1.002x that the rerun reverses must not read "1.00x ... reversed"."""
    out = judge(side(500, 530, tol=0.01), side(501, 500, tol=0.01), metric="memory", ceiling=0.5)
    assert isinstance(out, Judged) and out.verdict == "reversed"
    assert out.why.startswith(
        "published 1.002x less memory; rerun in one process: 0.94x by peak memory"
    )
    wide = judge(side(394, 389), side(687, 211), metric="latency", ceiling=0.5)
    assert "published 1.74x faster" in wide.why and "0.54x" in wide.why

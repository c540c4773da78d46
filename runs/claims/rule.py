"""A published claim, judged by a controlled rerun of both sides in one runner process.

A claim is the ratio a publication implies between two implementations of one cell (same
publication, workload, GPU, pass and metric): "Liger is 1.74x faster than Transformers". It
is judged only where the same runner process re-measured both implementations: one host
state, one set of clocks, one software stack. Never across GPU products. The published ratio
is never edited; the judged claim sits beside it.

The controlled ratio uses the figure the runner's own rule trusts for both sides: the
`do_bench` medians where both calls are device-bound (the protocol's figure), otherwise the
cold device times (what the GPU needs per call; a host-bound side's do_bench timed our host);
peak memory for memory. The ratio is always other / claimed-better, so > 1 means the claimed
side is better.

Verdicts, with t the cells' combined tolerance, (1 + t_a)(1 + t_b) - 1 (each side's figure
may move by its own tolerance, so their ratio by the product):
- holds: controlled ratio within a factor (1 + t) of the published one;
- reversed: the other side wins by more than the tolerance (controlled ratio < 1 / (1 + t));
- overstated: the controlled gap is smaller than published (beyond t);
- understated: the controlled gap is larger than published (beyond t).
A side whose tolerance exceeds runs.evidence.TOLERANCE_CEILING cannot be judged.
"""

from __future__ import annotations

from dataclasses import dataclass

HOLDS, OVERSTATED, UNDERSTATED, REVERSED = "holds", "overstated", "understated", "reversed"
# Reversed and overstated first: they are what a reader must not miss.
SEVERITY = {REVERSED: 0, OVERSTATED: 1, UNDERSTATED: 2, HOLDS: 3}


@dataclass(frozen=True)
class Side:
    """One implementation's published figure and its controlled rerun."""

    published: float  # the run's median, run units
    published_product: str  # the GPU product the source measured on
    tolerance: float  # the cell's tolerance the rerun's verdict used
    controlled_product: str | None = None  # None: this side was not rerun
    process: str | None = None
    do_bench: float | None = None  # controlled figures, one unit for both sides
    device: float | None = None
    device_bound: bool = False


@dataclass(frozen=True)
class Judged:
    verdict: str
    published_ratio: float
    controlled_ratio: float
    tolerance: float
    basis: str  # "do_bench", "device time" or "peak memory"
    why: str


@dataclass(frozen=True)
class Refused:
    why: str


def _times(ratio: float) -> str:
    """1.74x; a near tie keeps a third decimal, so that 1.002x against 0.94x reads as what it
    is rather than as "1.00x" reversed."""
    text = f"{ratio:.2f}"
    return f"{ratio:.3f}x" if text == "1.00" else f"{text}x"


def _figures(a: Side, b: Side, metric: str) -> tuple[float, float, str] | None:
    if metric == "memory":
        if a.do_bench and b.do_bench:
            return a.do_bench, b.do_bench, "peak memory"
        return None
    if a.device_bound and b.device_bound and a.do_bench and b.do_bench:
        return a.do_bench, b.do_bench, "do_bench"
    if a.device and b.device:
        return a.device, b.device, "device time"
    return None


def judge(better: Side, other: Side, *, metric: str, ceiling: float) -> Judged | Refused:
    """Judge the claim that `better` (the lower published figure) beats `other`."""
    if better.published_product != other.published_product:
        return Refused("the two runs were published on different GPU products")
    for side in (better, other):
        if side.controlled_product is None:
            return Refused("one side has no controlled rerun")
        if side.controlled_product != side.published_product:
            return Refused(
                f"rerun on a {side.controlled_product}, published on a {side.published_product}: "
                "a claim is never judged across GPU products"
            )
    if better.process is None or better.process != other.process:
        return Refused("the two sides were not rerun by the same runner process")
    if max(better.tolerance, other.tolerance) > ceiling:
        return Refused(f"a side's tolerance exceeds {ceiling:.0%}: too wide to judge")
    figures = _figures(better, other, metric)
    if figures is None:
        return Refused("no figure both sides' reruns can be compared by")
    mine, theirs, basis = figures
    if min(mine, theirs, better.published, other.published) <= 0:
        return Refused("a figure is not positive")
    published = other.published / better.published
    controlled = theirs / mine
    t = (1 + better.tolerance) * (1 + other.tolerance) - 1
    if published / (1 + t) <= controlled <= published * (1 + t):
        verdict = HOLDS
    elif controlled < 1 / (1 + t):
        verdict = REVERSED
    elif controlled < published:
        verdict = OVERSTATED
    else:
        verdict = UNDERSTATED
    word = "less memory" if metric == "memory" else "faster"
    why = (
        f"published {_times(published)} {word}; rerun in one process: {_times(controlled)} by "
        f"{basis} ({verdict}, combined tolerance {t:.0%})"
    )
    return Judged(verdict, published, controlled, t, basis, why)

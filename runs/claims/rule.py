"""A published claim, judged by a controlled rerun of both sides in one runner process.

A claim is the ratio a publication implies between two implementations of one cell (same
publication, workload, GPU, pass and metric): "Liger is 1.74x faster than Transformers". It
is judged only where the same runner process re-measured both implementations: one host
state, one set of clocks, one software stack. Never across GPU products. The published ratio
is never edited; the judged claim sits beside it.

A claim is judged on the basis it was published on. Liger's latency figures are wall-clock
`do_bench` medians (CUDA events around each call, the host's launch included), so a latency
claim is judged on the two sides' `do_bench` medians from one runner process: the wall clock
on our host, whichever side its host dominates. The ratio of the two cold device times (what
the GPU needs per call) is shown beside it as a second line, and never decides. Memory claims
are judged on peak memory. Every ratio is in the claim's own direction, other /
claimed-better, so > 1 means the claimed side is better and a reader never inverts one.

Verdicts, with t the cells' combined tolerance, (1 + t_a)(1 + t_b) - 1 (each side's figure
may move by its own tolerance, so their ratio by the product):
- a published ratio within t of 1 (at most 1 + t) claims a tie, not an order: the tie is
  confirmed where the controlled ratio is within a factor (1 + t) of 1 either way, else
  broken ("now 1.30x"); a tie is never "reversed";
- otherwise, holds: the controlled ratio within a factor (1 + t) of the published one;
- reversed: the other side wins by more than the tolerance (controlled ratio < 1 / (1 + t));
- overstated: the controlled gap is smaller than published (beyond t);
- understated: the controlled gap is larger than published (beyond t).
A side whose tolerance exceeds runs.evidence.TOLERANCE_CEILING cannot be judged.
"""

from __future__ import annotations

from dataclasses import dataclass

HOLDS, OVERSTATED, UNDERSTATED, REVERSED = "holds", "overstated", "understated", "reversed"
TIE_CONFIRMED, TIE_BROKEN = "tie-confirmed", "tie-broken"
# Reversed and overstated first: they are what a reader must not miss.
SEVERITY = {REVERSED: 0, OVERSTATED: 1, TIE_BROKEN: 2, UNDERSTATED: 3, HOLDS: 4, TIE_CONFIRMED: 5}
# What each verdict says, in the claim's own direction (the claims page lists them).
MEANING = {
    HOLDS: "the rerun measured the published ratio, within the combined tolerance",
    OVERSTATED: "the claimed side is still better, by less than published",
    UNDERSTATED: "the claimed side is better by more than published",
    REVERSED: "the other side is better in the rerun, beyond the combined tolerance",
    TIE_CONFIRMED: "published within the tolerance of 1 (a tie), and the rerun is a tie too",
    TIE_BROKEN: "published as a tie, and the rerun separates the two sides beyond the tolerance",
}
WALL_CLOCK, DEVICE_TIME, PEAK_MEMORY = "wall clock", "device time", "peak memory"


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
    # Why the evidence rule withheld this side's verdict (its rule 6: the runner's fidelity
    # to the source's script not established, or a figure of an earlier harness); "" if not.
    withheld: str = ""


@dataclass(frozen=True)
class Judged:
    verdict: str
    published_ratio: float
    controlled_ratio: float
    tolerance: float
    basis: str  # WALL_CLOCK or PEAK_MEMORY
    why: str
    device_ratio: float | None = None  # latency: the cold device times' ratio, same direction


@dataclass(frozen=True)
class Refused:
    why: str


def _times(ratio: float) -> str:
    """1.74x; a near tie keeps a third decimal, so that 1.002x against 0.94x reads as what it
    is rather than as "1.00x" reversed."""
    text = f"{ratio:.2f}"
    return f"{ratio:.3f}x" if text == "1.00" else f"{text}x"


def _figures(a: Side, b: Side, metric: str) -> tuple[float, float, str] | None:
    """The figures the claim was published on: peak memory, or the wall-clock do_bench."""
    if a.do_bench and b.do_bench:
        return a.do_bench, b.do_bench, PEAK_MEMORY if metric == "memory" else WALL_CLOCK
    return None


def _device_ratio(better: Side, other: Side, metric: str) -> float | None:
    if metric == "memory" or not (better.device and other.device):
        return None
    if better.device <= 0 or other.device <= 0:
        return None
    return other.device / better.device


def _standing(ratio: float, word: str, better: str, other: str) -> str:
    """Who is better by how much, in words: "Liger 1.30x faster", "a tie (1.02x)"."""
    if ratio >= 1:
        return f"{better} {_times(ratio)} {word}"
    return f"{other} {_times(1 / ratio)} {word}"


def _verdict(published: float, controlled: float, t: float) -> str:
    if published <= 1 + t:  # a tie was published
        return TIE_CONFIRMED if 1 / (1 + t) <= controlled <= 1 + t else TIE_BROKEN
    if published / (1 + t) <= controlled <= published * (1 + t):
        return HOLDS
    if controlled < 1 / (1 + t):
        return REVERSED
    return OVERSTATED if controlled < published else UNDERSTATED


def judge(
    better: Side,
    other: Side,
    *,
    metric: str,
    ceiling: float,
    names: tuple[str, str] = ("the claimed side", "the other side"),
) -> Judged | Refused:
    """Judge the claim that `better` (the lower published figure) beats `other`; `names` are
    the two implementations' names, for the reason."""
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
    # A figure the evidence rule would not judge a run on cannot judge a claim either: an
    # earlier memory protocol read the two sides low by different amounts (their modules'
    # weights), so their ratio is as wrong as each figure.
    for side in (better, other):
        if side.withheld:
            return Refused(f"a side's figure carries no verdict: {side.withheld}")
    figures = _figures(better, other, metric)
    if figures is None:
        return Refused("no figure both sides' reruns can be compared by")
    mine, theirs, basis = figures
    if min(mine, theirs, better.published, other.published) <= 0:
        return Refused("a figure is not positive")
    published = other.published / better.published
    controlled = theirs / mine
    t = (1 + better.tolerance) * (1 + other.tolerance) - 1
    verdict = _verdict(published, controlled, t)
    word = "less memory" if metric == "memory" else "faster"
    claimed = _standing(published, word, *names)
    if verdict in (TIE_CONFIRMED, TIE_BROKEN):
        claimed = (
            f"a tie of {names[0]} and {names[1]} ({_times(published)}, within the tolerance of 1)"
        )
    now = _standing(controlled, word, *names)
    if 1 / (1 + t) <= controlled <= 1 + t:
        now = f"a tie ({_times(controlled)})"
    why = f"published: {claimed}; rerun in one process, by {basis}: {now} (combined tolerance {t:.0%})"
    device = _device_ratio(better, other, metric)
    if device is not None:
        by_device = _standing(device, word, *names)
        if 1 / (1 + t) <= device <= 1 + t:
            by_device = f"a tie ({_times(device)})"
        why += f"; by device time: {by_device}"
    return Judged(verdict, published, controlled, t, basis, why, device)

"""The change rule, as plain Python over one cell's ordered medians (no Django), so the
pipeline, bench/changes.py and the tests apply exactly one rule. docs/changes.md explains it.

For each point i of a cell's history (its medians in publication order, oldest first):

1. The baseline is the up to WINDOW points before i, back to the last step found (a step
   starts a new level) and without the points already judged outliers; fewer than
   MIN_BASELINE points: i is not judged.
2. Its centre is the baseline median m; its robust spread s = 1.4826 * MAD / m (the MAD's
   estimate of a standard deviation, relative to the centre).
3. The threshold is t = max(Z * s, tolerance): never tighter than the cell's own tolerance
   (runs.evidence.tolerance_for), which is what "within the source's own spread" means
   elsewhere on the site.
4. A point with |x_i - m| / m <= t is no change. Beyond it, the next point decides:
   - beyond t on the same side too: a **step** at i (the new level persisted);
   - back inside: an **outlier** at i, one publication off that reverted at the next; it is
     recorded, shown as such, never reported as a regression or improvement;
   - no next point yet: **pending**, until the next publication settles it.
A cell whose tolerance, or whose point-to-point noise times Z, exceeds CEILING is **noisy**:
upstream's own figures for it move so much that no step could be told from noise, and it is
marked so instead of alarming. The noise is read from successive differences
(1.4826 * median |x_i - x_i-1| / sqrt 2, relative to the median), which a real step moves only
once, so a large genuine step does not make its own cell "noisy". Higher is worse for both metrics (latency, peak
memory): a step up is a regression, a step down an improvement.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

WINDOW = 8
MIN_BASELINE = 4
Z = 4.0
# The same ceiling as runs.evidence.TOLERANCE_CEILING: past a 50 % spread nothing is judged.
CEILING = 0.50
MAD_TO_SIGMA = 1.4826

STEP, OUTLIER, PENDING = "step", "outlier", "pending"
REGRESSION, IMPROVEMENT = "regression", "improvement"
JUDGED, NOISY, SHORT = "judged", "noisy", "short"


@dataclass(frozen=True)
class Change:
    index: int  # the point of the history where the median moved
    kind: str  # STEP, OUTLIER or PENDING
    direction: str  # REGRESSION or IMPROVEMENT
    before: float  # the baseline's median
    after: float  # the median at the point
    threshold: float  # relative: max(Z * spread, tolerance)

    @property
    def shift(self) -> float:
        """Relative move from the baseline: +0.25 is 25 % slower (or larger)."""
        return (self.after - self.before) / self.before


@dataclass
class Verdict:
    status: str  # JUDGED, NOISY or SHORT (too few points for any baseline)
    changes: list[Change] = field(default_factory=list)


def robust_spread(values: list[float]) -> tuple[float, float]:
    """(median, MAD-based relative spread) of the values."""
    m = statistics.median(values)
    if m <= 0:
        return m, float("inf")
    mad = statistics.median(abs(v - m) for v in values)
    return m, MAD_TO_SIGMA * mad / m


def point_noise(values: list[float]) -> float:
    """The relative noise of successive points (module docstring)."""
    m = statistics.median(values)
    if m <= 0:
        return float("inf")
    diffs = [abs(b - a) for a, b in zip(values, values[1:], strict=False)]
    return MAD_TO_SIGMA * statistics.median(diffs) / math.sqrt(2) / m


def detect(values: list[float], *, tolerance: float) -> Verdict:
    """The cell's changes under the rule of the module docstring."""
    if len(values) < MIN_BASELINE + 1:
        return Verdict(SHORT)
    if tolerance > CEILING or Z * point_noise(values) > CEILING:
        return Verdict(NOISY)
    changes: list[Change] = []
    start, outliers = 0, set()
    for i in range(len(values)):
        window = [j for j in range(start, i) if j not in outliers][-WINDOW:]
        if len(window) < MIN_BASELINE:
            continue
        m, s = robust_spread([values[j] for j in window])
        if m <= 0:
            continue
        t = max(Z * s, tolerance)
        d = (values[i] - m) / m
        if abs(d) <= t:
            continue
        direction = REGRESSION if d > 0 else IMPROVEMENT
        if i + 1 == len(values):
            kind = PENDING
        else:
            d_next = (values[i + 1] - m) / m
            kind = STEP if abs(d_next) > t and (d_next > 0) == (d > 0) else OUTLIER
        changes.append(Change(i, kind, direction, m, values[i], t))
        if kind == STEP:
            start = i
        elif kind == OUTLIER:
            outliers.add(i)
    return Verdict(JUDGED, changes)


# A publication at which at least this many cells of at least this many kernels moved the same
# way is a move of the benchmark host (a runner, driver or torch change upstream), not of the
# kernels: Liger's CI runs the whole suite on one machine per commit.
GROUP_MIN_CELLS = 10
GROUP_MIN_KERNELS = 3


def grouped(kernels_moved: list[str]) -> bool:
    """Whether these cells (one kernel name each), moved the same way at one publication,
    moved together."""
    return len(kernels_moved) >= GROUP_MIN_CELLS and len(set(kernels_moved)) >= GROUP_MIN_KERNELS

"""The change rule, as plain Python over one cell's ordered medians (no Django), so the
pipeline, bench/changes.py and the tests apply exactly one rule. docs/changes.md explains it.

1. **Levels.** The history is cut into levels by the change points that Apache Otava finds
   with its command-line defaults: e-divisive means in windows of 50 points, each split kept
   only where a Student t-test of the two sides gives p <= 0.001 (`change_points` below is
   that algorithm, otava.analysis.compute_change_points, in plain Python; bench/changes.py
   checks it against otava itself). A change point can be at the second publication.
2. **Threshold.** Each change point is judged against the level it left: the up to WINDOW
   points before it, back to the previous lasting level, without outliers and excursions.
   t = max(SIGMAS * s, FLOOR[metric]), s the baseline's robust spread (1.4826 * MAD / median)
   when it has at least SPREAD_POINTS points, else only the floor. Only points before the
   candidate enter it, so a step cannot widen its own threshold. A new level of more than
   TRANSIENT_MAX points is a median of many points, not one: it is held to the standard
   error of the difference of two levels, t_level = max(SIGMAS * s * sqrt(1/n + 1/k), floor)
   for n baseline points and k points of the new level (never above t), and it must hold:
   the medians of its first and of its last TRANSIENT_MAX + 1 points are both beyond
   t_level on its side. A change point whose new level passes neither is too small to
   report: the two levels are one.
3. **Kind.** The new level, from the change point on:
   - the newest point alone: **pending**, until the next publication settles it;
   - one point, then back within t of the old level: an **outlier**;
   - 2 to TRANSIENT_MAX points, then back within t of the old level: a **transient**, one
     excursion with its span (first and last publication), not two steps;
   - otherwise a **step** (a regression when the median went up, an improvement when it went
     down; both metrics are better lower). A step is lasting only while it holds: when a
     later publication brings the level back within TRANSIENT_MAX points, recomputing calls
     it a transient instead.
4. **Points off inside a level.** A point beyond t of the up to WINDOW points before it on
   its level (at least SPREAD_POINTS of them) that the significance test did not split off
   starts a run of points beyond t on that side: one point back at the next is an outlier,
   2 to TRANSIENT_MAX then back a transient, the newest point alone pending, a longer run (or
   one still off at the newest point) a step. A run of two or more counts only when otava's
   t-test of it against those baseline points gives p <= 0.001; otherwise the points are the
   level's own spread.
A cell whose point-to-point noise times SIGMAS exceeds CEILING is **noisy**: no single
publication could be told from noise, so no outlier, transient or pending point is judged
there. Its lasting levels still are (more than TRANSIENT_MAX points, rule steps 2 and 3):
where one passes, the cell is judged with those steps only; otherwise it is marked noisy
instead of alarming. The noise is read from successive
differences (1.4826 * median |x_i - x_i-1| / sqrt 2, relative to the median), which a real
step moves only once, so a large genuine step does not make its own cell "noisy".
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

WINDOW = 8
# Fewer baseline points than this give no spread: the floor alone is the threshold.
SPREAD_POINTS = 3
# A change needs this many points before it: a cell of this many publications or fewer is
# not judged (and not stored).
MIN_BASELINE = 1
# How many of the baseline's robust standard deviations a move must exceed: a single point
# against the baseline's spread, a lasting level against the standard error of the
# difference between the two levels (rule step 2).
SIGMAS = 4.0
# The same ceiling as runs.evidence.TOLERANCE_CEILING: past a 50 % spread nothing is judged.
CEILING = 0.50
# Below this many points the point-to-point noise is not read (one genuine step would be
# most of the differences).
NOISE_POINTS = 5
MAD_TO_SIGMA = 1.4826
# The smallest move reported, per metric: the tolerance floors of docs/evidence.md.
FLOOR = {"latency": 0.05, "memory": 0.01}
# A new level that lasted at most this many publications and came back is an excursion.
TRANSIENT_MAX = 4
# Apache Otava's command-line defaults (otava.main: --window, --p-value, --magnitude).
OTAVA_WINDOW = 50
OTAVA_PVALUE = 0.001

STEP, TRANSIENT, OUTLIER, PENDING = "step", "transient", "outlier", "pending"
REGRESSION, IMPROVEMENT = "regression", "improvement"
JUDGED, NOISY, SHORT = "judged", "noisy", "short"


@dataclass(frozen=True)
class Change:
    index: int  # the point of the history where the median moved
    kind: str  # STEP, TRANSIENT, OUTLIER or PENDING
    direction: str  # REGRESSION or IMPROVEMENT
    before: float  # the baseline's median
    after: float  # the new level's median (the point's value for a single point)
    threshold: float  # relative: max(SIGMAS * spread, floor)
    until: int | None = None  # a transient's last point

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


def threshold(baseline: list[float], *, metric: str) -> tuple[float, float]:
    """(median, threshold) of a baseline for a single point: rule step 2."""
    m, s = robust_spread(baseline)
    spread = SIGMAS * s if len(baseline) >= SPREAD_POINTS else 0.0
    return m, max(spread, FLOOR[metric])


def level_threshold(baseline: list[float], points: int, *, metric: str) -> float:
    """The threshold for a new level of `points` points against this baseline: the standard
    error of the difference of the two levels in the baseline's robust standard deviations,
    never above a single point's (rule step 2). Only the baseline's spread enters it."""
    m, s = robust_spread(baseline)
    n = len(baseline)
    if n < SPREAD_POINTS:
        return FLOOR[metric]
    return max(SIGMAS * s * min(1.0, math.sqrt(1 / n + 1 / points)), FLOOR[metric])


def _holds(level: list[float], m: float, t: float, up: bool) -> bool:
    """Whether a new level holds: its first TRANSIENT_MAX + 1 points are beyond t of m on
    its side (their median), and no rest of it from its second to its (TRANSIENT_MAX + 1)th
    point on is back within t of m (a short excursion with its return, in one segment)."""
    sign = 1 if up else -1
    if (statistics.median(level[: TRANSIENT_MAX + 1]) - m) / m * sign <= t:
        return False
    return all(
        (statistics.median(level[j:]) - m) / m * sign > t for j in range(1, TRANSIENT_MAX + 1)
    )


def detect(values: list[float], *, metric: str = "latency") -> Verdict:
    """The cell's changes under the rule of the module docstring."""
    n = len(values)
    if n <= MIN_BASELINE:
        return Verdict(SHORT)
    noisy = n >= NOISE_POINTS and SIGMAS * point_noise(values) > CEILING
    if min(values) <= 0:
        return Verdict(NOISY if noisy else JUDGED)
    cuts = [cp.index for cp in change_points(values)]
    changes: list[Change] = []
    level: list[int] = []  # the points of the current lasting level, oldest first
    i = 0
    while i < n:
        if i not in cuts or not level:
            if noisy:
                level.append(i)  # single points are not judged in a noisy cell
                i += 1
            else:
                i = _inside(values, i, level, cuts, changes, metric)
            continue
        baseline = [values[j] for j in level[-WINDOW:]]
        m, t = threshold(baseline, metric=metric)
        end = next((c for c in cuts if c > i), n)
        after = statistics.median(values[i:end])
        if end - i > TRANSIENT_MAX and (noisy or abs(after - m) / m <= t):
            # A lasting level, or a move within a single point's threshold: judged as a level.
            found = _lasting(values, i, end, baseline, t, metric=metric, noisy=noisy)
            if found is not None:
                changes.extend(found[0])
                level = found[1]
                i = end
                continue
        if noisy or abs(after - m) / m <= t:
            cuts.remove(i)  # too small to report: one level with the one before
            continue
        back_at = _back_at(values, i, end, m, t)
        if back_at is not None:
            after = statistics.median(values[i:back_at])
            end = back_at
        direction = REGRESSION if after > m else IMPROVEMENT
        back = back_at is not None or (end < n and abs(_level_at(values, end, cuts) - m) / m <= t)
        if end == n and end - i == 1:
            changes.append(Change(i, PENDING, direction, m, values[i], t))
            break
        if back and end - i <= TRANSIENT_MAX and back_at is None and _lasts(values, end, cuts):
            # Back within a point's threshold, but onto a lasting level of its own: the
            # excursion is one, and that level is judged as a level at its own change point.
            changes.append(_excursion(i, end, direction, m, after, t, values))
        elif back and end - i <= TRANSIENT_MAX:
            changes.append(_excursion(i, end, direction, m, after, t, values))
            if back_at is None:
                cuts.remove(end)  # the old level goes on: its return is no change of its own
        else:
            changes.append(Change(i, STEP, direction, m, after, t))
            level = list(range(i, end))
        i = end
    # A noisy cell is judged only where a lasting level was told from its noise.
    return Verdict(NOISY if noisy and not changes else JUDGED, changes)


def _back_at(values: list[float], i: int, end: int, m: float, t: float) -> int | None:
    """Where the segment [i, end) is back at the old level m for good, or None. The
    significance test may keep a return in the new level's segment (a short excursion in a
    long history): the excursion ends where the rest of it is back."""
    return next(
        (j for j in range(i + 1, end) if abs(values[j] - m) / m <= t
         and abs(statistics.median(values[j:end]) - m) / m <= t),
        None,
    )  # fmt: skip


def _lasting(values, i, end, baseline, t, *, metric, noisy):
    """Rule step 2 for the new level values[i:end] of more than TRANSIENT_MAX points: read
    without the excursions it holds (runs of at most TRANSIENT_MAX points beyond t of its
    median on one side, with the level after them), it is a step when its median is beyond
    the level threshold of the baseline and it holds. Returns (changes, the level's points):
    the step, dated at the level's first point, and, outside a noisy cell, the excursions as
    outliers and transients; or None."""
    centre = statistics.median(values[i:end])
    off = [abs(values[j] - centre) / centre > t for j in range(i, end)]
    runs, j = [], i
    while j < end:
        if not off[j - i]:
            j += 1
            continue
        up, r = values[j] > centre, j
        while r < end and off[r - i] and (values[r] > centre) == up:
            r += 1
        if r - j <= TRANSIENT_MAX and r < end:
            runs.append((j, r))
        j = r
    skipped = {k for a, b in runs for k in range(a, b)}
    kept = [k for k in range(i, end) if k not in skipped]
    if len(kept) <= TRANSIENT_MAX:
        return None
    m = statistics.median(baseline)
    level = [values[k] for k in kept]
    after = statistics.median(level)
    tl = level_threshold(baseline, len(kept), metric=metric)
    if abs(after - m) / m <= tl or not _holds(level, m, tl, after > m):
        return None
    changes = [Change(kept[0], STEP, REGRESSION if after > m else IMPROVEMENT, m, after, tl)]
    for a, b in [] if noisy else runs:
        # An excursion before the level's first point left the old level, one after it the new.
        ref = m if a < kept[0] else after
        moved = statistics.median(values[a:b])
        direction = REGRESSION if moved > ref else IMPROVEMENT
        changes.append(_excursion(a, b, direction, ref, moved, t, values))
    return sorted(changes, key=lambda c: c.index), kept


def _excursion(i, end, direction, m, after, t, values) -> Change:
    if end - i == 1:
        return Change(i, OUTLIER, direction, m, values[i], t)
    return Change(i, TRANSIENT, direction, m, after, t, until=end - 1)


def _lasts(values: list[float], start: int, cuts: list[int]) -> bool:
    """Whether the segment from the change point at `start` is long enough to be judged as a
    level of its own (rule step 2); where it is the old level again, that judgment merges it
    back."""
    end = next((c for c in cuts if c > start), len(values))
    return end - start > TRANSIENT_MAX


def _level_at(values: list[float], start: int, cuts: list[int]) -> float:
    end = next((c for c in cuts if c > start), len(values))
    return statistics.median(values[start:end])


def _inside(values, i, level, cuts, changes, metric) -> int:
    """Rule step 4 from point i, inside a level: the points up to the next one to judge are
    either joined to the level or recorded as off it. Returns that next point."""
    baseline = level[-WINDOW:]
    if len(baseline) < SPREAD_POINTS:
        level.append(i)
        return i + 1
    m, t = threshold([values[j] for j in baseline], metric=metric)
    d = (values[i] - m) / m
    if abs(d) <= t:
        level.append(i)
        return i + 1
    # The run of points beyond t on the same side, up to the next change point.
    end = i + 1
    while end < len(values) and end not in cuts and (values[end] - m) / m * d > t * abs(d):
        end += 1
    direction = REGRESSION if d > 0 else IMPROVEMENT
    after = statistics.median(values[i:end])
    if end - i > 1 and _ttest([values[j] for j in baseline], values[i:end])[0] > OTAVA_PVALUE:
        # Several points off, but not significantly: the level's own spread.
        level.extend(range(i, end))
        return end
    if end == len(values) and end - i == 1:
        changes.append(Change(i, PENDING, direction, m, after, t))
    elif end - i > TRANSIENT_MAX or end == len(values):
        # Off for longer than an excursion, or still off at the newest point: a step while
        # it holds.
        changes.append(Change(i, STEP, direction, m, after, t))
        level[:] = list(range(i, end))
    else:
        changes.append(_excursion(i, end, direction, m, after, t, values))
    return end


# A publication at which at least this many cells of at least this many kernels moved the same
# way is a move of the benchmark host (a runner, driver or torch change upstream), not of the
# kernels: Liger's CI runs the whole suite on one machine per commit.
GROUP_MIN_CELLS = 10
GROUP_MIN_KERNELS = 3


def grouped(kernels_moved: list[str]) -> bool:
    """Whether these cells (one kernel name each), moved the same way at one publication,
    moved together."""
    return len(kernels_moved) >= GROUP_MIN_CELLS and len(set(kernels_moved)) >= GROUP_MIN_KERNELS


# Apache Otava's change points (otava.analysis.compute_change_points, apache-otava 0.8.0,
# Apache License 2.0), without numpy or scipy: the web app runs the rule at every ingest and
# does not carry otava's dependencies (docs/changes.md). Same windows, same e-divisive
# candidate, same Student t-test (otava passes population standard deviations to scipy's
# pooled-variance test), same split and merge.


@dataclass
class ChangePoint:
    index: int
    pvalue: float
    mean_before: float
    mean_after: float

    @property
    def magnitude(self) -> float:
        if self.mean_before == 0 or self.mean_after == 0:
            return 0.0
        forward = self.mean_after / self.mean_before - 1.0
        backward = self.mean_before / self.mean_after - 1.0
        return max(abs(forward), abs(backward))


def change_points(
    series: list[float], *, window: int = OTAVA_WINDOW, max_pvalue: float = OTAVA_PVALUE
) -> list[ChangePoint]:
    """Otava's change points of the series, oldest first."""
    first_pass = max_pvalue * 10 if max_pvalue < 0.05 else max_pvalue * 2
    return _merge(_split(series, window, first_pass), series, max_pvalue)


def _intervals(points: list[ChangePoint], n: int) -> list[tuple[int, int]]:
    bounds = [0] + [p.index for p in points] + [n]
    return [(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if a != b]


def _ttest(left: list[float], right: list[float]) -> tuple[float, float, float]:
    """(p, mean left, mean right): otava's TTestSignificanceTester.compare."""
    n1, n2 = len(left), len(right)
    m1, m2 = sum(left) / n1, sum(right) / n2
    if n1 + n2 <= 2:
        return 1.0, m1, m2
    v1 = sum((x - m1) ** 2 for x in left) / n1 if n1 >= 2 else 0.0
    v2 = sum((x - m2) ** 2 for x in right) / n2 if n2 >= 2 else 0.0
    df = n1 + n2 - 2
    denom = math.sqrt(((n1 - 1) * v1 + (n2 - 1) * v2) / df * (1 / n1 + 1 / n2))
    if denom == 0:
        return (math.nan if m1 == m2 else 0.0), m1, m2
    t = (m1 - m2) / denom
    return _betainc(df / 2, 0.5, df / (df + t * t)), m1, m2


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (two-sided Student t p-value)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1 - x) / b


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _stats(index: int, series: list[float], intervals: list[tuple[int, int]]) -> ChangePoint:
    """A change point's test over the intervals either side of it (otava's change_point)."""
    for k, (a, b) in enumerate(intervals):
        if b == index:
            left, right = (a, b), intervals[k + 1]
            break
        if a < index < b:
            left, right = (a, index), (index, b)
            break
    else:
        raise ValueError(f"no interval holds {index}")
    p, m1, m2 = _ttest(series[left[0] : left[1]], series[right[0] : right[1]])
    return ChangePoint(index, p, m1, m2)


def _candidate(dist: list[list[float]], start: int, end: int) -> tuple[int, float]:
    """(index, q): the split of series[start:end] that maximises e-divisive's Q(tau, kappa)
    over start < tau < kappa <= end; on ties the first in otava's (tau, kappa) order, where
    the pairs with kappa <= tau count as 0."""
    # col[c][r]: sum of dist[i][c] for start <= i < r.
    col = {}
    for c in range(start, end):
        acc, row = 0.0, [0.0]
        for i in range(start, end):
            acc += dist[i][c]
            row.append(acc)
        col[c] = row
    best, best_q = None, -math.inf
    within_x = 0.0
    size = end - start - 1
    for ti, tau in enumerate(range(start + 1, end)):
        within_x += col[tau - 1][tau - 1 - start] if tau - 1 > start else 0.0
        n = tau - start
        cross = within_y = 0.0
        for ki in range(size):
            kappa = ki + start + 2
            if ki < ti:
                q = 0.0
            else:
                last = kappa - 1
                cross += col[last][n]
                within_y += col[last][last - start] - col[last][n]
                m = kappa - tau
                q = 2.0 / (m + n) * cross
                if n > 1:
                    q -= 2.0 * m / (m + n) / (n - 1) * within_x
                if m > 1:
                    q -= 2.0 * n / (m + n) / (m - 1) * within_y
            if q > best_q:
                best, best_q = tau, q
    return best, best_q


def _divisive(series: list[float], start: int, end: int, tester_p: float) -> list[ChangePoint]:
    """otava's ChangePointDetector over series[start:end], indices in the whole series."""
    window = series[start:end]
    dist = [[abs(a - b) for b in window] for a in window]
    points: list[ChangePoint] = []
    while True:
        intervals = _intervals(points, len(window))
        found = [_candidate(dist, a, b) for a, b in intervals if b - a > 1]
        if not found:
            break
        index, _ = max(found, key=lambda c: c[1])
        point = _stats(index, window, intervals)
        if not point.pvalue <= tester_p:
            break
        points.append(point)
        points.sort(key=lambda p: p.index)
    for p in points:
        p.index += start
    return points


def _split(series: list[float], window: int, tester_p: float) -> list[ChangePoint]:
    start, step, points = 0, window // 2, []
    while start < len(series):
        end = min(start + window, len(series))
        new = _divisive(series, start, end, tester_p)
        start = max(new[-1].index if new else 0, start + step)
        points += [p for p in new if p.index not in {q.index for q in points}]
    points.sort(key=lambda p: p.index)
    intervals = _intervals(points, len(series))
    return [_stats(p.index, series, intervals) for p in points]


def _merge(points: list[ChangePoint], series: list[float], max_pvalue: float) -> list:
    """otava's merge with min_magnitude 0: drop the weakest point until all pass the test."""
    while points:
        weakest = max(points, key=lambda p: p.pvalue)
        if weakest.pvalue < max_pvalue:
            weakest = min(points, key=lambda p: p.magnitude)
            if weakest.magnitude > 0.0:
                return points
        k = points.index(weakest)
        del points[k]
        intervals = _intervals(points, len(series))
        for j in (k, k + 1):
            if 0 <= j < len(points):
                points[j] = _stats(points[j].index, series, intervals)
    return points

"""The run page's history chart: one cell's medians across publications, server-rendered SVG.

What a reader needs to judge a history at a glance, all labelled: the y axis from zero with
its unit (a 1.7 % spread stays flat, as it should), the publication (commit) of every point,
the changes the rule detected (runs/changes/detect.py), each with the baseline it was tested
against as a band over the points before it (the baseline median ± the threshold the rule
applied there: a change point is the first outside its band), and a controlled
rerun's median in a mark of its own. Like runs/pages/charts.py: a <title> and a <desc> that
carries every number, text escaped here.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from runs.pages.charts import PALETTE, y_axis

REGRESSION_COLOUR, IMPROVEMENT_COLOUR = PALETTE[1], PALETTE[2]
BAND_COLOUR, RERUN_COLOUR = "#e8e8e8", PALETTE[3]


@dataclass(frozen=True)
class Mark:
    index: int  # the point it marks
    kind: str  # step, outlier or pending
    direction: str  # regression or improvement
    shift: float


@dataclass(frozen=True)
class Band:
    """The baseline a change was tested against: points start..end - 1, median ± threshold."""

    start: int  # the first baseline point
    end: int  # the change point (the band stops before it)
    low: float  # in the run's unit
    high: float
    label: str  # the change's publication


@dataclass(frozen=True)
class Rerun:
    value: float  # in the run's unit
    label: str  # "controlled rerun on NVIDIA H200"


def history_chart(
    *,
    chart_id: str,
    title: str,
    points: list[tuple[str, float]],
    current: int | None,
    y_scale: float,
    y_unit: str,
    y_label: str,
    bands: list[Band] = (),
    marks: list[Mark] = (),
    rerun: Rerun | None = None,
    width: int = 480,
    height: int = 230,
) -> str:
    """points: (publication label, value in the run's unit), oldest first."""
    if len(points) < 2:
        return ""
    values = [v / y_scale for _, v in points]
    bands = [
        Band(b.start, b.end, b.low / y_scale, b.high / y_scale, b.label)
        for b in bands
        if 0 <= b.start < b.end <= len(points)
    ]
    extra = [
        *(e for b in bands for e in (b.low, b.high)),
        *([rerun.value / y_scale] if rerun else []),
    ]
    # Linear from zero whatever the spread (y_axis goes linear once 0 is among the values).
    ticks, _ = y_axis([0.0, *values, *extra])
    frame = _Frame(width, height, len(points), ticks)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart history-chart" role="img" '
        f'viewBox="0 0 {width} {height + 22}" aria-labelledby="{chart_id}-t {chart_id}-d">',
        f'<title id="{chart_id}-t">{escape(title)}</title>',
        f'<desc id="{chart_id}-d">'
        f"{escape(_desc(points, values, y_unit, y_label, ticks, bands, marks, rerun, y_scale))}"
        "</desc>",
        *_axes(frame, bands, [label for label, _ in points], f"{y_label} ({y_unit})"),
        *_marks(marks, frame.px, frame.top, frame.plot_h),
        *_series(frame, values, current),
    ]
    if rerun and current is not None:
        x, y = frame.px(current), frame.py(rerun.value / y_scale)
        out.append(
            f'<path class="point rerun" d="M{x:.1f} {y - 6:.1f}L{x + 6:.1f} {y:.1f}L{x:.1f} '
            f'{y + 6:.1f}L{x - 6:.1f} {y:.1f}Z" fill="none" stroke="{RERUN_COLOUR}" '
            f'stroke-width="2"/>'
        )
    out.append(_legend(height, frame.left, bool(bands), rerun))
    out.append("</svg>")
    return "".join(out)


class _Frame:
    """The plot area: one slot per publication along x, the ticks' range along y."""

    left, right, top, bottom = 62, 10, 10, 84

    def __init__(self, width: int, height: int, n: int, ticks: list[float]):
        self.plot_w = width - self.left - self.right
        self.plot_h = height - self.top - self.bottom
        self.step = self.plot_w / n
        self.ticks = ticks
        self.lo = ticks[0]
        self.hi = ticks[-1] if ticks[-1] > ticks[0] else ticks[0] + 1

    def px(self, i: int) -> float:
        return self.left + self.step * (i + 0.5)

    def py(self, v: float) -> float:
        return self.top + self.plot_h - (v - self.lo) / (self.hi - self.lo) * self.plot_h


def _axes(f: _Frame, bands: list[Band], labels: list[str], y_title: str) -> list[str]:
    out = [
        f'<rect class="plot-area" x="{f.left}" y="{f.top}" width="{f.plot_w}" '
        f'height="{f.plot_h}" fill="none" stroke="#bbb"/>'
    ]
    for b in bands:
        y1, y2 = f.py(min(b.high, f.hi)), f.py(max(b.low, f.lo))
        x = f.left + f.step * b.start
        out.append(
            f'<rect class="tolerance-band" x="{x:.1f}" y="{y1:.1f}" '
            f'width="{f.step * (b.end - b.start):.1f}" height="{y2 - y1:.1f}" '
            f'fill="{BAND_COLOUR}"/>'
        )
    for t in f.ticks:
        y = f.py(t)
        out.append(
            f'<line x1="{f.left}" x2="{f.left + f.plot_w}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="#ddd"/><text class="tick" x="{f.left - 5}" y="{y + 4:.1f}" '
            f'text-anchor="end">{t:.4g}</text>'
        )
    out.append(
        f'<text class="axis-label" transform="translate(13 {f.top + f.plot_h / 2:.1f}) '
        f'rotate(-90)" text-anchor="middle">{escape(y_title)}</text>'
    )
    # The publication (commit) of every point, under it.
    for i, label in enumerate(labels):
        out.append(
            f'<text class="tick commit" transform="translate({f.px(i) + 3:.1f} '
            f'{f.top + f.plot_h + 8}) rotate(-60)" text-anchor="end">{escape(label[:14])}</text>'
        )
    return out


def _series(f: _Frame, values: list[float], current: int | None) -> list[str]:
    path = " ".join(
        f"{'M' if i == 0 else 'L'}{f.px(i):.1f} {f.py(v):.1f}" for i, v in enumerate(values)
    )
    out = [
        f'<g class="series"><path d="{path}" fill="none" stroke="{PALETTE[0]}" stroke-width="1.5"/>'
    ]
    for i, v in enumerate(values):
        big = i == current
        out.append(
            f'<circle class="point" cx="{f.px(i):.1f}" cy="{f.py(v):.1f}" '
            f'r="{4 if big else 2.5}" fill="{PALETTE[1] if big else PALETTE[0]}"/>'
        )
    out.append("</g>")
    return out


def _marks(marks, px, top: float, plot_h: float) -> list[str]:
    out = []
    for m in marks:
        colour = REGRESSION_COLOUR if m.direction == "regression" else IMPROVEMENT_COLOUR
        dash = {"step": "", "pending": ' stroke-dasharray="2 3"'}.get(
            m.kind, ' stroke-dasharray="5 4"'
        )
        x = px(m.index)
        out.append(
            f'<g class="change {escape(m.kind)} {escape(m.direction)}">'
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + plot_h}" stroke="{colour}" '
            f'stroke-width="{2 if m.kind == "step" else 1}"{dash}/>'
            f'<text x="{x + 3:.1f}" y="{top + 12}" fill="{colour}">{m.shift:+.0%}</text></g>'
        )
    return out


def _legend(height: int, left: int, band: bool, rerun: Rerun | None) -> str:
    """One row under the plot; the caption says what dashed and dotted lines mean."""
    y = height + 12
    items = [
        f'<circle cx="{left}" cy="{y - 4}" r="4" fill="{PALETTE[1]}"/>'
        f'<text x="{left + 8}" y="{y}">this run</text>',
        f'<line x1="{left + 80}" x2="{left + 80}" y1="{y - 12}" y2="{y + 2}" '
        f'stroke="{REGRESSION_COLOUR}" stroke-width="2"/><text x="{left + 86}" y="{y}">change</text>',
    ]
    if band:
        items.append(
            f'<rect x="{left + 160}" y="{y - 10}" width="14" height="10" fill="{BAND_COLOUR}"/>'
            f'<text x="{left + 178}" y="{y}">baseline</text>'
        )
    if rerun:
        x = left + 262
        items.append(
            f'<path d="M{x + 5} {y - 10}L{x + 10} {y - 5}L{x + 5} {y}L{x} {y - 5}Z" fill="none" '
            f'stroke="{RERUN_COLOUR}" stroke-width="2"/><text x="{x + 14}" y="{y}">rerun</text>'
        )
    return f'<g class="legend">{"".join(items)}</g>'


def _desc(points, values, unit, y_label, ticks, bands, marks, rerun, y_scale) -> str:
    text = (
        f"{y_label} ({unit}) in {len(points)} publications, oldest first; axis from "
        f"{ticks[0]:.4g} to {ticks[-1]:.4g} {unit}, values from {min(values):.4g} to "
        f"{max(values):.4g}. "
        + ", ".join(f"{label} {v:.4g}" for (label, _), v in zip(points, values, strict=True))
        + "."
    )
    for b in bands:
        text += (
            f" Baseline tested at {b.label}: {b.low:.4g} to {b.high:.4g} {unit}, over "
            f"{points[b.start][0]} to {points[b.end - 1][0]}."
        )
    for m in marks:
        text += f" {m.kind.capitalize()} ({m.direction}, {m.shift:+.0%}) at {points[m.index][0]}."
    if rerun:
        text += f" {rerun.label[0].upper()}{rerun.label[1:]}: {rerun.value / y_scale:.4g} {unit}."
    return text

"""Server-rendered SVG charts: readable without JavaScript and by screen readers.

Every chart has a <title> and a <desc> that a screen reader announces (the desc lists the
numbers, so the chart is never the only place a value lives), axis labels with units, and a
legend. Text is escaped here; templates insert the result as-is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

# Colour-blind-safe palette (Okabe-Ito), in legend order.
PALETTE = ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#f0e442"]
MARKERS = ["circle", "square", "diamond", "triangle"]
LEGEND_ROW = 24


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]] = field(default_factory=list)


def _is_powers_of_two(xs: list[float]) -> bool:
    values = sorted({x for x in xs if x > 0})
    if len(values) < 3 or len(values) != len({x for x in xs}):
        return False
    return all(math.log2(v).is_integer() for v in values) and values[-1] / values[0] >= 8


def _linear_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round ticks whose first is at or below lo and whose last is at or above hi, so every
    value in [lo, hi] lies inside the axis they span."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1)
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    # The small tolerance keeps a value that is a multiple of the step from adding a tick.
    start = math.floor(lo / step + 1e-9) * step
    end = math.ceil(hi / step - 1e-9) * step
    n = max(1, round((end - start) / step))
    return [round(start + i * step, 10) for i in range(n + 1)]


def _log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks (only powers of ten past three decades) enclosing [lo, hi], both > 0."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    mantissas = (1, 2, 5) if last - first <= 3 else (1,)
    candidates = [m * 10.0**e for e in range(first, last + 1) for m in mantissas]
    below = max(t for t in candidates if t <= lo * (1 + 1e-9))
    above = min(t for t in candidates if t >= hi * (1 - 1e-9))
    return [float(f"{t:.6g}") for t in candidates if below <= t <= above]


def y_axis(values: list[float]) -> tuple[list[float], bool]:
    """Ticks for values on a y axis, and whether the axis is logarithmic: log when the values
    span more than a decade (a linear axis would flatten all but the largest), linear from 0
    otherwise."""
    positive = [v for v in values if v > 0]
    if positive and len(positive) == len(values) and max(positive) / min(positive) > 10:
        return _log_ticks(min(positive), max(positive)), True
    return _linear_ticks(min(0.0, *values), max(values) if values else 1), False


def _fmt_tick(t: float) -> str:
    return f"{t:,.6g}" if abs(t) >= 1000 else f"{t:.6g}"


def _fmt_x(x: float) -> str:
    if x >= 1024 and float(x).is_integer() and math.log2(x).is_integer():
        return f"{int(x) // 1024}K" if x < 2**20 else f"{int(x) // 2**20}M"
    return f"{x:g}"


def _marker(kind: str, x: float, y: float, colour: str, cls: str = "point") -> str:
    # Plotted points carry class="point" (the browser tests check each lies inside its axes);
    # legend swatches do not.
    c = f' class="{cls}"' if cls else ""
    if kind == "square":
        return f'<rect{c} x="{x - 3:.1f}" y="{y - 3:.1f}" width="6" height="6" fill="{colour}"/>'
    if kind == "diamond":
        return (
            f'<path{c} d="M{x:.1f} {y - 4:.1f}L{x + 4:.1f} {y:.1f}L{x:.1f} {y + 4:.1f}'
            f'L{x - 4:.1f} {y:.1f}Z" fill="{colour}"/>'
        )
    if kind == "triangle":
        return (
            f'<path{c} d="M{x:.1f} {y - 4:.1f}L{x + 4:.1f} {y + 3:.1f}L{x - 4:.1f} {y + 3:.1f}Z" '
            f'fill="{colour}"/>'
        )
    return f'<circle{c} cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>'


@dataclass(frozen=True)
class _Plot:
    """A line chart's frame and scales: where a value lands, in SVG units."""

    left: int
    top: int
    plot_w: int
    plot_h: int
    height: int
    y_scale: float
    x_names: list[str] | None
    log_x: bool
    x_ticks: list
    x_lo: float
    x_hi: float
    # A little room either side so end markers are not cut by the frame.
    pad_x: float
    log_y: bool
    y_ticks: list
    y_lo: float
    y_hi: float

    def fx(self, v: float) -> float:
        return math.log2(v) if self.log_x else v

    def fy(self, v: float) -> float:
        return math.log10(v) if self.log_y else v

    def px(self, x: float) -> float:
        span = self.plot_w - 2 * self.pad_x
        return self.left + self.pad_x + (self.fx(x) - self.x_lo) / (self.x_hi - self.x_lo) * span

    def py_scaled(self, v: float) -> float:
        return (
            self.top
            + self.plot_h
            - (self.fy(v) - self.y_lo) / (self.y_hi - self.y_lo) * self.plot_h
        )

    def py(self, y: float) -> float:
        return self.py_scaled(y / self.y_scale)

    def x_name(self, x: float) -> str:
        return self.x_names[int(x)] if self.x_names is not None else _fmt_x(x)


def _plot(
    series: list[Series], y_scale: float, width: int, height: int, x_names: list[str] | None
) -> _Plot | None:
    xs = [x for s in series for x, _ in s.points]
    ys = [y / y_scale for s in series for _, y in s.points]
    if not xs:
        return None
    log_x = x_names is None and _is_powers_of_two(xs)
    if x_names is not None:
        xs = list(range(len(x_names)))
    left, right, top, bottom = 72, 16, 16, 48
    plot_w = width - left - right
    fx = (lambda v: math.log2(v)) if log_x else (lambda v: v)
    distinct_x = sorted(set(xs))
    if log_x or len(distinct_x) <= 10 or x_names is not None:
        x_ticks = distinct_x[:: max(1, math.ceil(len(distinct_x) / 10))]
        x_lo, x_hi = fx(distinct_x[0]), fx(distinct_x[-1])
    else:
        x_ticks = _linear_ticks(distinct_x[0], distinct_x[-1], count=6)
        x_lo, x_hi = x_ticks[0], x_ticks[-1]
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    y_ticks, log_y = y_axis(ys)
    fy = (lambda v: math.log10(v)) if log_y else (lambda v: v)
    y_lo, y_hi = fy(y_ticks[0]), fy(y_ticks[-1])
    if y_hi == y_lo:
        y_hi = y_lo + 1
    return _Plot(
        left=left,
        top=top,
        plot_w=plot_w,
        plot_h=height - top - bottom,
        height=height,
        y_scale=y_scale,
        x_names=x_names,
        log_x=log_x,
        x_ticks=x_ticks,
        x_lo=x_lo,
        x_hi=x_hi,
        pad_x=plot_w * 0.03,
        log_y=log_y,
        y_ticks=y_ticks,
        y_lo=y_lo,
        y_hi=y_hi,
    )


def _description(plot: _Plot, series: list[Series], x_label: str, y_label: str, y_unit: str):
    """The chart as text, for readers who cannot see it: every point of every series."""
    parts = []
    for s in series:
        values = ", ".join(
            f"{plot.x_name(x)}: {y / plot.y_scale:.4g} {y_unit}" for x, y in s.points
        )
        parts.append(f"{s.name}: {values}.")
    return (
        f"{y_label} ({y_unit}) against {x_label}"
        + (" on a logarithmic axis" if plot.log_x else "")
        + (f", {y_label.lower()} on a logarithmic axis" if plot.log_y else "")
        + ". "
        + " ".join(parts)
    )


def _axis_marks(plot: _Plot, x_label: str, y_label: str, y_unit: str) -> list[str]:
    left, top, plot_w, plot_h = plot.left, plot.top, plot.plot_w, plot.plot_h
    out = []
    for t in plot.y_ticks:
        y = plot.py_scaled(t)
        out.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
            f'<text class="tick" x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{_fmt_tick(t)}</text>"
        )
    for x in plot.x_ticks:
        X = plot.px(x)
        out.append(
            f'<line x1="{X:.1f}" x2="{X:.1f}" y1="{top + plot_h}" y2="{top + plot_h + 4}" '
            f'stroke="#555"/><text class="tick" x="{X:.1f}" y="{top + plot_h + 17}" '
            f'text-anchor="middle">{escape(plot.x_name(x))}</text>'
        )
    out.append(
        f'<text class="axis-label" x="{left + plot_w / 2:.1f}" y="{top + plot_h + 38}" '
        f'text-anchor="middle">{escape(x_label)}{" (log scale)" if plot.log_x else ""}</text>'
        f'<text class="axis-label" transform="translate(14 {top + plot_h / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_label)} ({escape(y_unit)}'
        f"{', log scale' if plot.log_y else ''})</text>"
    )
    return out


def _series_marks(plot: _Plot, series: list[Series]) -> list[str]:
    """Each series' line and markers, and its row of the legend under the plot."""
    left, px, py = plot.left, plot.px, plot.py
    out = []
    for i, s in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        marker = MARKERS[i % len(MARKERS)]
        pts = sorted(s.points)
        path = " ".join(
            f"{'M' if j == 0 else 'L'}{px(x):.1f} {py(y):.1f}" for j, (x, y) in enumerate(pts)
        )
        out.append(f'<g class="series" data-series="{escape(s.name)}">')
        out.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        out.extend(_marker(marker, px(x), py(y), colour) for x, y in pts)
        out.append("</g>")
        ly = plot.height + LEGEND_ROW * i + 8
        out.append(
            f'<g class="legend-item">{_marker(marker, left + 6, ly, colour, "")}'
            f'<line x1="{left - 4}" x2="{left + 16}" y1="{ly}" y2="{ly}" stroke="{colour}" '
            f'stroke-width="2"/><text x="{left + 24}" y="{ly + 4}">{escape(s.name)}</text></g>'
        )
    return out


def line_chart(
    *,
    chart_id: str,
    title: str,
    series: list[Series],
    x_label: str,
    y_label: str,
    y_scale: float,
    y_unit: str,
    width: int = 640,
    height: int = 320,
    x_names: list[str] | None = None,
) -> str:
    """One line per series. y values are divided by y_scale and labelled in y_unit.

    x is logarithmic (base 2) when the sweep is powers of two, as upstream's sweeps mostly are;
    with x_names, the xs are positions 0, 1, ... of those named values, evenly spaced.
    """
    plot = _plot(series, y_scale, width, height, x_names)
    if plot is None:
        return ""
    # Legend rows have room for the larger text phones get (site.css).
    total_h = height + LEGEND_ROW * len(series)
    desc = _description(plot, series, x_label, y_label, y_unit)
    return "".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" class="chart line-chart" role="img" '
            f'viewBox="0 0 {width} {total_h}" aria-labelledby="{chart_id}-t {chart_id}-d">',
            f'<title id="{chart_id}-t">{escape(title)}</title>',
            f'<desc id="{chart_id}-d">{escape(desc)}</desc>',
            f'<rect class="plot-area" x="{plot.left}" y="{plot.top}" width="{plot.plot_w}" '
            f'height="{plot.plot_h}" fill="none" stroke="#bbb"/>',
            *_axis_marks(plot, x_label, y_label, y_unit),
            *_series_marks(plot, series),
            "</svg>",
        ]
    )


def bar_chart(
    *,
    chart_id: str,
    title: str,
    bars: list[tuple[str, float, bool]],
    value_label: str,
    y_scale: float,
    y_unit: str,
    width: int = 640,
) -> str:
    """Horizontal bars, one per (label, value, highlighted), in the order given (rank order)."""
    if not bars:
        return ""
    left, right, top, row = 200, 90, 8, 26
    height = top + row * len(bars) + 36
    plot_w = width - left - right
    hi = max(v for _, v, _ in bars) / y_scale or 1
    desc = f"{value_label} ({y_unit}): " + "; ".join(
        f"{label} {v / y_scale:.4g}" for label, v, _ in bars
    )
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart bar-chart" role="img" '
        f'viewBox="0 0 {width} {height}" aria-labelledby="{chart_id}-t {chart_id}-d">',
        f'<title id="{chart_id}-t">{escape(title)}</title>',
        f'<desc id="{chart_id}-d">{escape(desc)}.</desc>',
    ]
    for i, (label, value, highlight) in enumerate(bars):
        y = top + i * row
        w = (value / y_scale) / hi * plot_w
        colour = PALETTE[1] if highlight else PALETTE[0]
        out.append(
            f'<g class="bar"><text x="{left - 8}" y="{y + 16}" text-anchor="end">'
            f"{escape(label)}</text>"
            f'<rect x="{left}" y="{y + 4}" width="{max(w, 1):.1f}" height="{row - 8}" '
            f'fill="{colour}"/><text class="value" x="{left + w + 6:.1f}" y="{y + 16}">'
            f"{value / y_scale:.4g} {escape(y_unit)}</text></g>"
        )
    axis_y = top + row * len(bars) + 4
    out.append(
        f'<line x1="{left}" x2="{left + plot_w}" y1="{axis_y}" y2="{axis_y}" stroke="#555"/>'
        f'<text class="axis-label" x="{left + plot_w / 2:.1f}" y="{axis_y + 24}" '
        f'text-anchor="middle">{escape(value_label)} ({escape(y_unit)}), shorter is better</text>'
    )
    out.append("</svg>")
    return "".join(out)


def unit_scale(unit: str, values: list[float]) -> tuple[float, str]:
    """One display unit for a whole chart, picked from its largest value."""
    top = max(values) if values else 0
    if unit == "ns":
        for factor, name in [(1e9, "s"), (1e6, "ms"), (1e3, "µs")]:
            if top >= factor:
                return factor, name
        return 1, "ns"
    if unit == "B":
        for factor, name in [(2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")]:
            if top >= factor:
                return factor, name
        return 1, "B"
    return 1, unit

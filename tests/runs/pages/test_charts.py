"""The server-rendered charts: every plotted point inside its axes, readable ticks, a log axis
where the values span more than a decade."""

from __future__ import annotations

import re

from runs.pages import charts


def _plot_area(svg: str) -> tuple[float, float, float, float]:
    m = re.search(
        r'class="plot-area" x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"', svg
    )
    x, y, w, h = map(float, m.groups())
    return x, y, x + w, y + h


def _vertices(svg: str) -> list[tuple[float, float]]:
    """Every vertex of every series line: one per plotted point."""
    out = []
    for d in re.findall(r'<g class="series"[^>]*><path d="([^"]+)"', svg):
        out += [(float(a), float(b)) for a, b in re.findall(r"[ML]([-\d.]+) ([-\d.]+)", d)]
    return out


def _y_ticks(svg: str) -> list[str]:
    return re.findall(
        r'<text class="tick" x="\d+" y="[\d.]+" text-anchor="end">([^<]+)</text>', svg
    )


def test_every_point_lies_inside_its_axes():
    cases = {
        # The H200 latency plot of llama4_rope: the largest value (349.3 µs) above a round tick.
        "one point per line": [
            charts.Series("Liger", [(8192, 101_500)]),
            charts.Series("Transformers", [(8192, 349_300)]),
        ],
        "a sweep": [
            charts.Series("a", [(1024, 120_000), (2048, 241_000), (4096, 301_000)]),
            charts.Series("b", [(1024, 90_000), (2048, 180_000), (4096, 360_100)]),
        ],
        "a max on a tick": [charts.Series("a", [(1, 100_000), (2, 300_000), (3, 200_000)])],
        "many decades": [charts.Series("a", [(2**i, 1000 * 3**i) for i in range(10, 20)])],
        "linear x with many values": [charts.Series("a", [(i * 7, 5 + i) for i in range(1, 30)])],
    }
    for name, series in cases.items():
        svg = charts.line_chart(
            chart_id="c", title=name, series=series, x_label="seq", y_label="Median latency",
            y_scale=1000, y_unit="µs",
        )  # fmt: skip
        x0, y0, x1, y1 = _plot_area(svg)
        points = _vertices(svg)
        assert len(points) == sum(len(s.points) for s in series), name
        for x, y in points:
            assert x0 <= x <= x1 and y0 <= y <= y1, (name, (x, y), (x0, y0, x1, y1))
        # The top tick is at or above the largest value, with a round label.
        top = float(_y_ticks(svg)[-1].replace(",", ""))
        assert top >= max(v for s in series for _, v in s.points) / 1000, name


def test_log_axis_where_values_span_more_than_a_decade():
    wide = charts.line_chart(
        chart_id="w", title="t", x_label="n", y_label="Median latency", y_scale=1000, y_unit="µs",
        series=[charts.Series("a", [(1, 12_000), (2, 50_000), (4, 400_000)])],
    )  # fmt: skip
    assert "Median latency (µs, log scale)" in wide
    assert _y_ticks(wide) == ["10", "20", "50", "100", "200", "500"]
    narrow = charts.line_chart(
        chart_id="n", title="t", x_label="n", y_label="Median latency", y_scale=1000, y_unit="µs",
        series=[charts.Series("a", [(1, 120_000), (2, 349_300)])],
    )  # fmt: skip
    assert "log scale" not in narrow
    assert _y_ticks(narrow) == ["0", "100", "200", "300", "400"]

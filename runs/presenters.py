"""Shape query results for the benchmark, group and compare pages (no queries here)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from runs import charts
from runs.catalogue import normalise_param, param_order
from runs.models import Metric, TimedPass


@dataclass
class Panel:
    """One plot: a timed pass, metric, GPU and the fixed parameters, swept over one parameter."""

    chart_id: str
    title: str
    sweep: str
    fixed: str
    unit: str
    order: tuple = ()
    xs: list[float] = field(default_factory=list)
    implementations: list[str] = field(default_factory=list)
    # cells[x][implementation] = run
    cells: dict = field(default_factory=lambda: defaultdict(dict))
    svg: str = ""

    @property
    def rows(self) -> list[tuple[float, list]]:
        return [(x, [self.cells[x].get(i) for i in self.implementations]) for x in self.xs]


_PASS_ORDER = {"forward": 0, "no-grad-forward": 1, "backward": 2, "full": 3}


def _swept_param(run) -> str:
    name = normalise_param(run.sweep_name)
    if name in run.workload.parameters:
        return name
    # A script's sweep axis may carry a name the workload spells differently: pick the parameter
    # whose value is the swept value.
    for key, value in run.workload.parameters.items():
        if isinstance(value, int | float) and run.sweep_value == value:
            return key
    return name


def benchmark_panels(benchmark, runs) -> list[Panel]:
    panels: dict[tuple, Panel] = {}
    for run in runs:
        swept = _swept_param(run)
        fixed_params = {k: v for k, v in run.workload.parameters.items() if k != swept}
        fixed = " · ".join(
            str(fixed_params[k]) if k == "dtype" else f"{k} = {fixed_params[k]}"
            for k in sorted(fixed_params, key=param_order)
        )
        key = (
            run.publication_id,
            run.timed_pass,
            run.metric,
            run.environment.gpu.upstream_name,
            swept,
            fixed,
        )
        panel = panels.get(key)
        if panel is None:
            title = (
                f"{benchmark.title}: {Metric(run.metric).label.lower()}, "
                f"{TimedPass(run.timed_pass).label.lower()} pass, "
                f"{run.environment.gpu.upstream_name}"
            )
            panel = panels[key] = Panel(
                chart_id=f"p{len(panels) + 1}",
                title=title,
                sweep=swept,
                fixed=fixed,
                unit=run.unit,
                order=(
                    run.metric != "latency",
                    _PASS_ORDER.get(run.timed_pass, 9),
                    run.environment.gpu.upstream_name,
                    swept,
                    fixed,
                ),
            )
        if run.sweep_value is None:
            continue
        if run.sweep_value not in panel.cells:
            panel.xs.append(run.sweep_value)
        name = run.implementation.display_name
        if name not in panel.implementations:
            panel.implementations.append(name)
        panel.cells[run.sweep_value][name] = run
    out = []
    for panel in panels.values():
        panel.xs.sort()
        panel.implementations.sort()
        series = [
            charts.Series(
                impl,
                [(x, panel.cells[x][impl].median) for x in panel.xs if impl in panel.cells[x]],
            )
            for impl in panel.implementations
        ]
        values = [y for s in series for _, y in s.points]
        factor, unit_name = charts.unit_scale(panel.unit, values)
        metric_label = "Median latency" if panel.unit == "ns" else "Median peak memory"
        panel.svg = charts.line_chart(
            chart_id=panel.chart_id,
            title=f"{panel.title}" + (f" ({panel.fixed})" if panel.fixed else ""),
            series=series,
            x_label=panel.sweep,
            y_label=metric_label,
            y_scale=factor,
            y_unit=unit_name,
        )
        out.append(panel)
    out.sort(key=lambda p: p.order)
    return out


def _flatten(value, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        flat: dict[str, object] = {}
        for key in sorted(value):
            flat.update(_flatten(value[key], f"{prefix}.{key}" if prefix else key))
        return flat
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        flat = {}
        for i, item in enumerate(value):
            flat.update(_flatten(item, f"{prefix}[{i}]"))
        return flat
    return {prefix: value}


@dataclass
class DiffRow:
    field: str
    left: object
    right: object

    @property
    def differs(self) -> bool:
        return self.left != self.right


def spec_diff(left: dict, right: dict) -> list[DiffRow]:
    """Every leaf of two digest-covered specs, side by side."""
    a, b = _flatten(left), _flatten(right)
    return [DiffRow(k, a.get(k, "—"), b.get(k, "—")) for k in sorted(set(a) | set(b))]


def comparability(a, b) -> tuple[bool, str]:
    """(comparable, a plain sentence why)."""
    if a.group_id == b.group_id:
        return True, (
            "Comparable: both runs are in the same comparison group (same benchmark, timed pass, "
            "metric, workload, GPU and protocol family, in the same publication), so their "
            "medians rank against each other."
        )
    reasons = []
    if a.benchmark_id != b.benchmark_id:
        reasons.append("they measure different benchmarks")
    if a.timed_pass != b.timed_pass:
        reasons.append("they time different passes")
    if a.metric != b.metric:
        reasons.append("they measure different metrics")
    if a.workload_id != b.workload_id:
        reasons.append("their workloads differ")
    if a.environment_id != b.environment_id:
        reasons.append("they ran on different hardware")
    if a.protocol.family != b.protocol.family:
        reasons.append("their protocols belong to different comparability families")
    if not reasons and a.group.cell_key == b.group.cell_key:
        return False, (
            "Not ranked together: the two runs measure the same cell but come from different "
            "publications (different upstream runs), so they are two points of one history "
            "rather than competitors."
        )
    if not reasons:
        reasons.append("they were swept differently upstream")
    return False, "Not comparable: " + ", ".join(reasons) + "."

"""The benchmark page: its runs shaped into plots (panels), one shown at a time, chosen by
links that keep the choice in the URL (no queries here)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from urllib.parse import urlencode

from runs.models import Metric, TimedPass, page_url
from runs.pages import charts
from runs.reference.catalogue import normalise_param, param_order


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
    # cells[x][implementation] = the run's ShownRun
    cells: dict = field(default_factory=lambda: defaultdict(dict))
    # What the benchmark page selects a panel by.
    source_slug: str = ""
    source_name: str = ""
    gpu_slug: str = ""
    gpu_name: str = ""
    timed_pass: str = ""
    metric: str = ""
    publication: object = None  # the one publication a panel's runs come from
    observed: object = None  # when its newest run was measured
    # implementation display name -> provider key (the baseline is chosen by key in the URL)
    keys: dict = field(default_factory=dict)

    @property
    def rows(self) -> list[tuple[float, list]]:
        return [(x, [self.cells[x].get(i) for i in self.implementations]) for x in self.xs]

    @property
    def sweep_label(self) -> str:
        return self.sweep or "Workload"


@dataclass
class ShownRun:
    """What a panel's cell shows of its run. The panels are kept for every choice of view of
    the benchmark page (runs/pages/views.py) and unpickled by each: as models, the
    fused_neighborhood_attention page's 2,478 runs took 132 ms to unpickle (3.7 MB); these
    fields are all a cell, a summary row or a chart reads."""

    pk: int
    public_id: str
    median: float | None
    unit: str
    rank: int | None
    evidence: str
    host_dominated: float | None = None  # set per view (views._mark_host_dominated)

    @classmethod
    def of(cls, run) -> ShownRun:
        return cls(run.pk, run.public_id, run.median, run.unit, run.rank, run.evidence)

    def get_absolute_url(self) -> str:
        return page_url("runs:detail", self.public_id)


def x_label(x) -> str:
    """A sweep value as a table shows it: numbers without trailing zeros, a value upstream
    wrote as text verbatim, and "one workload" where nothing is swept (KernelBench)."""
    if x is None:
        return "one workload"
    if isinstance(x, float):
        return str(int(x)) if x.is_integer() else f"{x:.6g}"
    return str(x)


def _x_order(x) -> tuple:
    # Numbers in order, then text sizes in upstream's spelling: one sweep can hold both.
    return (0, x, "") if isinstance(x, int | float) else (1, 0, str(x))


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


def _sweep_x(run, swept: str):
    """The run's position on its panel's x axis: the swept value, the parameter's own value
    when upstream swept something that is not a number, None when nothing is swept."""
    if run.sweep_value is not None:
        return run.sweep_value
    if not swept:
        return None
    return run.workload.parameters.get(swept)


def _panel_key(run) -> tuple[tuple, str, str]:
    """(the panel a run belongs to, its swept parameter, its fixed ones as text): one panel
    per publication, pass, metric, GPU and workload family."""
    swept = _swept_param(run) if run.sweep_name else ""
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
    return key, swept, fixed


def _new_panel(benchmark, run, chart_id: str, swept: str, fixed: str) -> Panel:
    gpu = run.environment.gpu
    title = (
        f"{benchmark.title}: {Metric(run.metric).label.lower()}, "
        f"{TimedPass(run.timed_pass).label.lower()} pass, {gpu.upstream_name}"
    )
    return Panel(
        chart_id=chart_id,
        title=title,
        sweep=swept,
        fixed=fixed,
        unit=run.unit,
        order=(
            run.metric != "latency",
            _PASS_ORDER.get(run.timed_pass, 9),
            gpu.upstream_name,
            swept,
            fixed,
        ),
        source_slug=run.publication.source.slug,
        source_name=run.publication.source.name,
        gpu_slug=gpu.slug,
        gpu_name=gpu.upstream_name,
        timed_pass=run.timed_pass,
        metric=run.metric,
        publication=run.publication,
    )


def benchmark_panels(benchmark, runs) -> list[Panel]:
    panels: dict[tuple, Panel] = {}
    for run in runs:
        key, swept, fixed = _panel_key(run)
        panel = panels.get(key)
        if panel is None:
            panel = panels[key] = _new_panel(benchmark, run, f"p{len(panels) + 1}", swept, fixed)
        x = _sweep_x(run, swept)
        if x not in panel.cells:
            panel.xs.append(x)
        name = run.implementation.display_name
        if name not in panel.implementations:
            panel.implementations.append(name)
            panel.keys[name] = run.implementation.provider_key
        panel.cells[x][name] = ShownRun.of(run)
        panel.observed = max(panel.observed or run.observed_at, run.observed_at)
    out = []
    for panel in panels.values():
        panel.xs.sort(key=_x_order)
        panel.implementations.sort()
        out.append(panel)
    out.sort(key=lambda p: p.order)
    return out


# The benchmark page: one plot at a time, chosen by links that keep the choice in the URL.

BASELINE_PREFERENCE = ("huggingface", "torch", "pytorch")
PLOTS = {"median": "Median", "speedup": "Speed-up"}
_SELECTORS = ("source", "gpu", "pass", "metric", "workload", "baseline", "plot")


class BadChoice(ValueError):
    """A query parameter names nothing on this benchmark page."""


@dataclass
class Choice:
    label: str
    query: str  # the whole query string of the page this link opens
    current: bool


@dataclass
class SummaryRow:
    panel: Panel
    query: str
    fastest: str
    wins: int
    sizes: int
    run: object  # the fastest implementation's run at the largest size
    speedup: float | None
    baseline: str


@dataclass
class BenchmarkView:
    panel: Panel | None
    selectors: list[tuple[str, list[Choice]]]
    summary: list[SummaryRow]
    baseline: str  # display name
    plot: str
    svg: str
    # (x, [(run or None, speed-up over the baseline or None) per implementation])
    rows: list
    notes: list[str]


def _speedup(run, base) -> float | None:
    if run is None or base is None or not run.median:
        return None
    return base.median / run.median


def _workload_label(panel: Panel) -> str:
    if not panel.sweep:
        return panel.fixed or "one workload"
    return f"{panel.sweep} sweep" + (f" · {panel.fixed}" if panel.fixed else "")


def _default_baseline(panel: Panel) -> str:
    for key in BASELINE_PREFERENCE:
        for name, k in panel.keys.items():
            if k == key:
                return name
    return panel.implementations[0]


_DIMS = [
    ("source", "source", lambda p: p.source_slug, lambda p: p.source_name),
    ("gpu", "GPU", lambda p: p.gpu_slug, lambda p: p.gpu_name),
    ("pass", "pass", lambda p: p.timed_pass, lambda p: TimedPass(p.timed_pass).label),
    ("metric", "metric", lambda p: p.metric, lambda p: Metric(p.metric).label),
]
_DIM_TITLES = {"source": "Source", "gpu": "GPU", "pass": "Pass", "metric": "Metric"}


def _plural(n: int) -> str:
    return "" if n == 1 else "s"


def _resolve(panels: list[Panel], params) -> tuple[dict, list[Panel], list, list[str]]:
    """Narrow the panels by source, GPU, pass and metric in turn: each asked-for value the
    panels left have, else the default. Returns the choices, the panels left, each
    dimension's options, and a sentence per asked-for value that had to change."""
    notes: list[str] = []
    chosen: dict[str, str] = {}
    candidates = panels
    selector_values: list[tuple[str, str, list[tuple[str, str]]]] = []
    for name, noun, key, label in _DIMS:
        options: dict[str, str] = {}
        for p in sorted(candidates, key=lambda p: p.order):
            options.setdefault(key(p), label(p))
        ordered = list(options.items())
        if name in ("source", "gpu"):
            # The default is the one with the most measurements; the links read alphabetically.
            size: dict[str, int] = defaultdict(int)
            for p in candidates:
                size[key(p)] += sum(len(c) for c in p.cells.values())
            default = max(ordered, key=lambda kv: (size[kv[0]], kv[1]))[0]
            ordered.sort(key=lambda kv: kv[1])
        else:
            default = ordered[0][0]
        wanted = params.get(name)
        value = wanted if wanted in options else default
        if wanted and wanted not in options:
            # In words, not slugs: the value is known (benchmark_view checked), just not here.
            asked = next(label(p) for p in panels if key(p) == wanted)
            where = f" in {candidates[0].source_name}" if name != "source" else ""
            notes.append(f"No {asked} {noun}{where} for this choice; showing {options[value]}.")
        chosen[name] = value
        selector_values.append((name, _DIM_TITLES[name], ordered))
        candidates = [p for p in candidates if key(p) == value]
    candidates.sort(key=lambda p: p.order)
    return chosen, candidates, selector_values, notes


def _same_workload(panels: list[Panel], params, current: Panel) -> str:
    """The workload link number that shows the current panel's workload after another choice
    of source, GPU, pass or metric; "1" where that choice does not have it."""
    candidates = _resolve(panels, params)[1]
    label = _workload_label(current)
    for i, p in enumerate(candidates):
        if _workload_label(p) == label:
            return str(i + 1)
    return "1"


def _check_choices(panels: list[Panel], params) -> None:
    """BadChoice for a query value that names nothing on this page."""
    known = {
        "source": {p.source_slug for p in panels},
        "gpu": {p.gpu_slug for p in panels},
        "pass": {p.timed_pass for p in panels},
        "metric": {p.metric for p in panels},
        "baseline": {k for p in panels for k in p.keys.values()},
        "plot": set(PLOTS),
    }
    for name, values in known.items():
        value = params.get(name)
        if value is not None and value not in values:
            choices = ", ".join(sorted(values)) or "none"
            raise BadChoice(f"Unknown {name} {value!r}; this page has: {choices}.")
    workload = params.get("workload", "1")
    if not workload.isdigit() or not 1 <= int(workload) <= 999:
        raise BadChoice("workload is a number from the workload links, like 1.")


def _pick_workload(candidates: list[Panel], workload: int, chosen, selector_values, notes):
    """The panel of the asked-for workload link (the panels left differ only in the swept
    parameter and the fixed ones), or the last one, with a note, when there are fewer."""
    index = min(workload, len(candidates))
    if workload > len(candidates):
        notes.append(
            f"This choice has {len(candidates)} workload{_plural(len(candidates))}; "
            f"showing the {_workload_label(candidates[index - 1])}."
        )
    chosen["workload"] = str(index)
    if len(candidates) > 1:
        selector_values.append(
            (
                "workload",
                "Workload",
                [(str(i + 1), _workload_label(p)) for i, p in enumerate(candidates)],
            )
        )
    return candidates[index - 1]


def _pick_baseline(panels: list[Panel], panel: Panel, params, chosen, selector_values, notes):
    """The implementation speed-ups are over: the asked-for one where the plot has it."""
    by_key = {k: n for n, k in panel.keys.items()}
    baseline = by_key.get(params.get("baseline", ""), _default_baseline(panel))
    wanted = params.get("baseline")
    if wanted and wanted not in by_key:
        names = {k: n for p in panels for n, k in p.keys.items()}
        notes.append(f"{names[wanted]} is not in this plot; speed-ups are over {baseline}.")
    chosen["baseline"] = panel.keys[baseline]
    selector_values.append(
        ("baseline", "Speed-up relative to",
         [(panel.keys[n], n) for n in panel.implementations])
    )  # fmt: skip
    return baseline


def _rows(panel: Panel, baseline: str) -> list:
    """(x label, [(run, speed-up over the baseline)] per implementation) per swept value."""
    rows = []
    for x in panel.xs:
        base = panel.cells[x].get(baseline)
        rows.append(
            (x_label(x), [(panel.cells[x].get(i), _speedup(panel.cells[x].get(i), base))
                          for i in panel.implementations])
        )  # fmt: skip
    return rows


def benchmark_view(panels: list[Panel], params) -> BenchmarkView:
    """Pick the panel the query asks for (source, gpu, pass, metric, workload), the baseline
    implementation and the plot kind; each unset or unavailable choice falls back to the first
    available one, and a value that names nothing on this page raises BadChoice."""
    _check_choices(panels, params)
    if not panels:
        return BenchmarkView(None, [], [], "", "median", "", [], [])

    chosen, candidates, selector_values, notes = _resolve(panels, params)
    workload = int(params.get("workload", "1"))
    panel = _pick_workload(candidates, workload, chosen, selector_values, notes)
    baseline = _pick_baseline(panels, panel, params, chosen, selector_values, notes)
    chosen["plot"] = params.get("plot", "median")
    selector_values.append(("plot", "Plot", list(PLOTS.items())))

    def query(**change: str) -> str:
        state = {**chosen, **change}
        if change.keys() & {d[0] for d in _DIMS}:
            # The same workload where the other choice has it, else its first.
            state["workload"] = _same_workload(panels, {**params, **state}, panel)
        return urlencode({k: state[k] for k in _SELECTORS if state.get(k)})

    selectors = [
        (title, [Choice(label, query(**{name: value}), value == chosen[name])
                 for value, label in ordered])
        for name, title, ordered in selector_values
    ]  # fmt: skip
    rows = _rows(panel, baseline)
    svg = _panel_svg(panel, rows, baseline, chosen["plot"])
    summary = _summary(panels, chosen)
    return BenchmarkView(panel, selectors, summary, baseline, chosen["plot"], svg, rows, notes)


def _panel_svg(panel: Panel, rows, baseline: str, plot: str) -> str:
    memory = panel.unit != "ns"
    # A sweep over text values (upstream may write any x) is plotted in its order, evenly.
    categorical = not all(isinstance(x, int | float) for x in panel.xs)
    rows = [(i if categorical else x, cells) for i, (x, (_, cells)) in
            enumerate(zip(panel.xs, rows, strict=True))]  # fmt: skip
    if plot == "speedup":
        label = f"{'Memory saving' if memory else 'Speed-up'} over {baseline}"
        values = {i: [(x, cells[j][1]) for x, cells in rows if cells[j][1]]
                  for j, i in enumerate(panel.implementations)}  # fmt: skip
        y_scale, unit = 1, "×, higher is better"
    else:
        label = "Median peak memory" if memory else "Median latency"
        values = {i: [(x, cells[j][0].median) for x, cells in rows if cells[j][0]]
                  for j, i in enumerate(panel.implementations)}  # fmt: skip
        y_scale, unit = charts.unit_scale(panel.unit, [v for s in values.values() for _, v in s])
        unit = f"{unit}, lower is better"
    title = panel.title + (f" ({panel.fixed})" if panel.fixed else "")
    if len(panel.xs) == 1:
        # One size: a line through one point says nothing; bars in rank order do.
        bars = sorted(
            ((name, pts[0][1], name == baseline) for name, pts in values.items() if pts),
            key=lambda b: -b[1] if plot == "speedup" else b[1],
        )
        return charts.bar_chart(
            chart_id="plot", title=title, bars=bars, value_label=label, y_scale=y_scale,
            y_unit=unit.split(",")[0],
        )  # fmt: skip
    return charts.line_chart(
        chart_id="plot",
        title=title,
        series=[charts.Series(name, pts) for name, pts in values.items()],
        x_label=panel.sweep,
        y_label=label,
        y_scale=y_scale,
        y_unit=unit.split(",")[0],
        x_names=[x_label(x) for x in panel.xs] if categorical else None,
    )


def _summary(panels: list[Panel], chosen: dict) -> list[SummaryRow]:
    """The fastest implementation per GPU and pass (latency) in the chosen source: the lowest
    median at the largest size of each sweep (the size kernels are chosen for), how many of
    the sweep's sizes it also wins, and its lead there over the reference implementation (or,
    when it is the reference, over the runner-up)."""
    out = []
    latency = sorted(
        (p for p in panels if p.source_slug == chosen["source"] and p.metric == "latency"),
        key=lambda p: (p.gpu_name, _PASS_ORDER.get(p.timed_pass, 9), p.order),
    )
    seen: dict[tuple, int] = defaultdict(int)
    for p in latency:
        if not p.xs:
            continue
        seen[(p.gpu_slug, p.timed_pass)] += 1
        wins: dict[str, int] = defaultdict(int)
        for x in p.xs:
            wins[min(p.cells[x].items(), key=lambda kv: kv[1].median)[0]] += 1
        ranked = sorted(p.cells[p.xs[-1]].items(), key=lambda kv: kv[1].median)
        fastest, run = ranked[0]
        baseline = _default_baseline(p)
        other = p.cells[p.xs[-1]].get(baseline) if baseline != fastest else None
        if other is None and len(ranked) > 1:
            baseline, other = ranked[1]
        out.append(
            SummaryRow(
                panel=p,
                query=urlencode(
                    {
                        "source": p.source_slug,
                        "gpu": p.gpu_slug,
                        "pass": p.timed_pass,
                        "metric": "latency",
                        "workload": seen[(p.gpu_slug, p.timed_pass)],
                    }
                ),  # fmt: skip
                fastest=fastest,
                wins=wins[fastest],
                sizes=len(p.xs),
                run=run,
                speedup=_speedup(run, other) if other is not None and other is not run else None,
                baseline=baseline,
            )
        )
    return out

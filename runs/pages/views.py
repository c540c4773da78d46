"""Public pages. Reads only: every page is a GET with a constant number of queries."""

from __future__ import annotations

import hashlib
import json
from operator import attrgetter

from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_safe

from kilib.origin import absolute
from runs.changes.models import CellChange
from runs.extensions import run_extensions
from runs.manifest import citation
from runs.manifest.canonical import run_manifest
from runs.models import (
    Benchmark,
    ComparisonGroup,
    Evidence,
    EvidenceEvent,
    Gpu,
    ImportRecord,
    Publication,
    Run,
    Source,
    Tally,
)
from runs.pages import charts, data_parts, run_sections
from runs.pages.benchmark import BadChoice, benchmark_panels, benchmark_view
from runs.pages.compare import comparability, spec_diff
from runs.pages.home import benchmark_groups
from runs.pages.listing import catalogue_options
from runs.read import catalogue, freshness
from runs.read.browse import BadQuery, browse
from runs.read.filters import RunFilter
from runs.read.freshness import DATA, cached
from runs.read.page_cache import public_page


def _canonical(request: HttpRequest) -> str:
    return absolute(request.path)


def _current_run(public_id: str) -> Run:
    run = Run.objects.for_run_page().current_or_404(public_id)
    catalogue.attach([run])
    return run


@require_safe
def healthz(request: HttpRequest) -> HttpResponse:
    """Liveness for load balancers: answers without touching the database."""
    return HttpResponse("ok\n", content_type="text/plain; charset=utf-8")


@require_safe
@public_page
def home(request: HttpRequest) -> HttpResponse:
    # Everything below the page's shell reads the run data only, so it is kept rendered under
    # the data version: only an ingest or an evidence change recomputes it.
    return render(
        request,
        "runs/home.html",
        {"parts": cached("home-parts", [DATA], _home_parts), "canonical": _canonical(request)},
    )


def _home_parts() -> dict[str, str]:
    """The totals, the catalogue with its counts and the newest runs, rendered."""
    latest = list(Run.objects.public().with_workload().newest()[:10])
    catalogue.attach(latest)
    context = {"catalogue": _home_catalogue(), "runs": latest}
    return {
        name: mark_safe(render_to_string(template, context))
        for name, template in (
            ("totals", "runs/_home_totals.html"),
            ("catalogue", "runs/_home_catalogue.html"),
            ("latest", "runs/_run_table.html"),
        )
    }


def _home_catalogue() -> dict:
    """Benchmarks, GPUs and sources with their runs, and the totals."""
    counts = Tally.objects.home_counts()  # kept by the write side: no scan of the runs
    lists = {
        "benchmark": sorted(Benchmark.objects.all(), key=attrgetter("title")),
        "gpu": list(Gpu.objects.all()),  # the model's order: vendor, product, form factor
        "source": sorted(Source.objects.all(), key=attrgetter("name")),
    }

    def counted(rows, by: str, *, every: bool = False) -> list:
        found = [row for row in rows if every or counts[by].get(row.pk)]
        for row in found:
            row.n = counts[by].get(row.pk, 0)
        return found

    sources = counted(lists["source"], "source", every=True)
    last_import = ImportRecord.objects.last_per_source()
    for source in sources:
        source.last = last_import.get(source.pk)
    return {
        "benchmark_groups": benchmark_groups(
            counted(lists["benchmark"], "benchmark"),
            counts.get("benchmark_source", {}),
            {s.pk: s.name for s in lists["source"]},
        ),
        "gpus": counted(lists["gpu"], "gpu"),
        "sources": sources,
        "totals": {"n": counts["total"], "first": counts["first"]},
        "groups": counts["groups"],
    }


@require_safe
@public_page(reads=freshness.run_page)
def run_detail(request: HttpRequest, public_id: str) -> HttpResponse:
    # The panels may skip their queries for a run nothing was ever written about.
    activity = freshness.run_activity(public_id)
    # The run and the sections that read the run data only, kept under its version (with the
    # panels of such a run, where this reader's are every anonymous reader's).
    page = run_sections.page(public_id, _verdict, run_extensions.quiet_panels(request, activity))
    run = page["run"]
    run.activity = activity
    permalink = citation.permalink(run)
    return render(
        request,
        "runs/run_detail.html",
        {
            "run": run,
            "sections": page["sections"],
            "panels": run_extensions.render_panels(request, run, page.get("quiet_panels")),
            "permalink": permalink,
            "today": timezone.now().date(),
            "canonical": permalink,
        },
    )


def _verdict(run: Run) -> EvidenceEvent | None:
    """Why the level is what it is: a reported or controlled run has no rerun verdict."""
    if run.evidence in (Evidence.REPORTED, Evidence.CONTROLLED):
        return None
    return EvidenceEvent.objects.latest_for(run)


@require_safe
@public_page
def run_history(request: HttpRequest, public_id: str) -> HttpResponse:
    """Every point of the run's cell across publications, a page of 100 at a time (the run
    page shows the points around this run)."""
    run = _current_run(public_id)
    points = Run.objects.history_points(run)
    page = Paginator(points, 100).get_page(request.GET.get("page"))
    return render(
        request,
        "runs/run_history.html",
        {"run": run, "page": page, "canonical": _canonical(request)},
    )


@require_safe
@public_page
def run_manifest_json(request: HttpRequest, public_id: str) -> HttpResponse:
    """The current revision's manifest, or ?revision=N's (the ledger links both revisions of a
    run that a silently rewritten upstream file revised)."""
    wanted = request.GET.get("revision", "")
    if wanted and (not wanted.isdigit() or len(wanted) > 5):
        raise Http404("A revision is a whole number, like 1.")
    # The current revision's manifest is kept with the run page's sections.
    current = run_sections.page(public_id, _verdict)
    if not wanted or int(wanted) == current["run"].revision:
        return HttpResponse(current["manifest_json"], content_type="application/json")
    run = get_object_or_404(Run.objects.for_run_page(), public_id=public_id, revision=int(wanted))
    catalogue.attach([run])
    return JsonResponse(run_manifest(run), json_dumps_params={"indent": 2, "ensure_ascii": False})


@require_safe
@public_page
def run_cite(request: HttpRequest, public_id: str, fmt: str) -> HttpResponse:
    # Behind the page cache like the run page it cites: the run data and the access date
    # (in every page's key) are all it reads.
    if fmt not in ("bib", "csl.json"):
        raise Http404("Citations come as cite.bib (BibTeX) or cite.csl.json (CSL-JSON).")
    run = _current_run(public_id)
    today = timezone.now().date()
    if fmt == "bib":
        response = HttpResponse(
            citation.bibtex(run, today), content_type="application/x-bibtex; charset=utf-8"
        )
    else:
        response = HttpResponse(
            json.dumps(citation.csl_json(run, today), indent=2, ensure_ascii=False),
            content_type="application/vnd.citationstyles.csl+json; charset=utf-8",
        )
    response["Content-Disposition"] = f'attachment; filename="kernelindex-{run.public_id}.{fmt}"'
    return response


@require_safe
@public_page
def run_compare(request: HttpRequest, public_id: str, other_id: str) -> HttpResponse:
    a = _current_run(public_id)
    b = _current_run(other_id)
    comparable, sentence = comparability(a, b)
    ratio = a.median / b.median if b.median else None
    sections = [
        ("Workload", "workload digest", a.workload.digest, b.workload.digest,
         spec_diff(a.workload.spec, b.workload.spec)),
        ("Implementation", "implementation digest", a.implementation.digest,
         b.implementation.digest, spec_diff(a.implementation.spec, b.implementation.spec)),
        ("Protocol", "protocol digest", a.protocol.digest, b.protocol.digest,
         spec_diff(a.protocol.spec, b.protocol.spec)),
        ("Environment", "environment digest", a.environment.digest, b.environment.digest,
         spec_diff(a.environment.spec, b.environment.spec)),
    ]  # fmt: skip
    return render(
        request,
        "runs/compare.html",
        {
            "a": a,
            "b": b,
            "comparable": comparable,
            "sentence": sentence,
            "ratio": ratio,
            "sections": sections,
            "canonical": _canonical(request),
        },
    )


@require_safe
@public_page(reads=lambda slug: freshness.benchmark_page(run_extensions.benchmark_reads()))
def benchmark_detail(request: HttpRequest, slug: str) -> HttpResponse:
    benchmark = get_object_or_404(Benchmark, slug=slug)
    # The tables and charts read the run data only: kept under its version for each choice
    # of view (a few hundred runs go into one); the community panel is rendered each time.
    choice = repr(tuple(request.GET.get(name, "") for name in BENCHMARK_CHOICES))
    status, body = cached(
        f"benchmark:{benchmark.pk}:{hashlib.sha256(choice.encode()).hexdigest()[:24]}",
        [DATA],
        lambda: _benchmark_body(benchmark, request.GET),
        keep=lambda value: value[0] == 200,
    )
    return render(
        request,
        "runs/benchmark_detail.html",
        {
            "benchmark": benchmark,
            "body": body,
            "canonical": _canonical(request),
            "panels": run_extensions.render_benchmark_panels(request, benchmark),
        },
        status=status,
    )


# The query parameters benchmark_view reads; nothing else changes the page.
BENCHMARK_CHOICES = ("source", "gpu", "pass", "metric", "baseline", "plot", "workload")


def _benchmark_body(benchmark: Benchmark, params) -> tuple[int, str]:
    # What every choice of view starts from is kept once per benchmark and data version: a
    # crawl of the demo's 2,796 choice pages read it 2,796 times over before.
    parts = cached(f"benchmark-panels:{benchmark.pk}", [DATA], lambda: _benchmark_panels(benchmark))
    context = {"benchmark": benchmark, "shown": parts["shown"], "verdicts": parts["verdicts"]}
    try:
        context["view"] = view = benchmark_view(parts["panels"], params)
    except BadChoice as exc:
        context["error"] = str(exc)
        status = 400
    else:
        _mark_host_dominated([r for _, cells in view.rows for r, _ in cells if r is not None])
        status = 200
    body = render_to_string("runs/_benchmark_body.html", context)
    # The changes depend on four of the seven choices: every baseline, plot and workload of one
    # narrowing shares them (a crawl of the demo's choice pages spent a quarter of its time
    # rendering the same ones again).
    narrowed = {"source": params.get("source"), "gpu": params.get("gpu"),
                "timed_pass": params.get("pass"), "metric": params.get("metric")}  # fmt: skip
    # Kept only where the view took the choices: a bad one is a key a client could vary at will.
    which = hashlib.sha256(repr(sorted(narrowed.items())).encode()).hexdigest()[:24]
    changes = (
        cached(
            f"benchmark-changes:{benchmark.pk}:{which}",
            [DATA],
            lambda: _benchmark_changes(benchmark, narrowed),
        )
        if status == 200
        else _benchmark_changes(benchmark, narrowed)
    )
    return status, mark_safe(f"{body}\n{changes}")


def _benchmark_panels(benchmark: Benchmark) -> dict:
    """The panels of every GPU, pass and metric a source measured, each from its newest
    publication, the publications they show and the verdicts per GPU: whatever the view."""
    groups = ComparisonGroup.objects.newest_per_view(benchmark=benchmark)
    runs = list(Run.objects.public().in_groups(groups).for_listing().by_cell())
    catalogue.attach(runs)
    panels = benchmark_panels(benchmark, runs)
    shown = {p.publication.pk: p.publication for p in panels}
    return {
        "panels": panels,
        "shown": sorted(shown.values(), key=_publication_order),
        "verdicts": Run.objects.verdicts_by_gpu(benchmark),
    }


CHANGES_SHOWN = 20


def _benchmark_changes(benchmark: Benchmark, narrowed: dict) -> str:
    """The benchmark's detected steps, narrowed to the source, GPU, pass and metric the page
    shows when its query names them; newest publication first, ungrouped regressions first
    within one. Two queries whatever the data."""
    changes = CellChange.objects.reported().of_benchmark(benchmark).narrowed_to(**narrowed)
    context = {
        "benchmark": benchmark,
        "changes": list(changes.with_related().newest_regressions_first()[:CHANGES_SHOWN]),
        "total": changes.count(),
        "narrowed": any(narrowed.values()),
    }
    return render_to_string("runs/_benchmark_changes.html", context)


def _publication_order(publication: Publication) -> tuple:
    return (publication.source.name, -publication.sequence, publication.slug)


def _mark_host_dominated(runs: list) -> None:
    """Label the shown runs whose published figure a controlled rerun found host-dominated.
    Only runs a rerun has judged can carry it, so most pages ask nothing."""
    judged = [r.pk for r in runs if r.evidence not in (Evidence.REPORTED, Evidence.CONTROLLED)]
    factors = EvidenceEvent.objects.host_dominated_factors(judged) if judged else {}
    for run in runs:
        run.host_dominated = factors.get(run.pk)


@require_safe
@public_page
def group_detail(request: HttpRequest, key: str) -> HttpResponse:
    group = ComparisonGroup.objects.by_key_prefix_or_404(key)
    # Its heading, ranking and claims read the run data only: rendered once per data change
    # (the group alone is read per request, not the five rows its heading names). The chart
    # is drawn per request, as it marks the bar of the run the reader came from.
    parts = cached(f"group-parts:{group.pk}", [DATA], lambda: data_parts.group_page(group))
    unit = parts["unit"]
    factor, unit_name = charts.unit_scale(unit, [median for _, median, _ in parts["bars"]])
    focus = request.GET.get("run", "")
    bar_svg = charts.bar_chart(
        chart_id="group",
        title=f"Median {group.metric} by implementation, rank order",
        bars=[(label, median, run == focus) for label, median, run in parts["bars"]],
        value_label="Median latency" if unit == "ns" else "Median peak memory",
        y_scale=factor,
        y_unit=unit_name,
    )
    return render(
        request,
        "runs/group_detail.html",
        {"group": group, "parts": parts, "bar_svg": bar_svg, "canonical": _canonical(request)},
    )


@require_safe
@public_page
def run_list(request: HttpRequest) -> HttpResponse:
    # The page's ids, then its rows in one query (runs/read/browse.py); the filter form's
    # options from the catalogue (runs/pages/listing.py).
    context = {"canonical": _canonical(request)}
    try:
        listing = browse(request.GET)
    except BadQuery as bad:
        # The form keeps what was typed, so the reader can fix it.
        filterset = RunFilter(request.GET or None, queryset=Run.objects.none())
        context.update(filter=filterset, page=None, errors=bad.errors,
                       options=catalogue_options(request.GET))  # fmt: skip
        return render(request, "runs/run_list.html", context, status=400)
    page = listing.page()
    query = request.GET.copy()
    query.pop("cursor", None)
    query.pop("page", None)  # links from before cursors: they start at the first page
    context.update(
        filter=listing.filterset,
        options=catalogue_options(request.GET),
        page=page,
        query=query.urlencode(),
        next_cursor=page.next.encode() if page.next else "",
        previous_cursor=page.previous.encode() if page.previous else "",
    )
    return render(request, "runs/run_list.html", context)


@require_safe
@public_page
def source_ledger(request: HttpRequest, slug: str) -> HttpResponse:
    """Every fetch of the source's upstream files, newest first: the upstream ledger, a page
    of LEDGER_PAGE entries at a time, each page older than the entry named by `?before=`."""
    source = get_object_or_404(Source, slug=slug)
    raw = request.GET.get("before", "")
    if raw and not (raw.isdigit() and len(raw) < 19):
        raise Http404("A ledger page starts before an entry, named by its number.")
    before = int(raw) if raw else None
    # Its rows read the run data only: rendered once per data change. Only pages with entries
    # are kept, so a client naming entries that do not exist adds no keys.
    page = cached(
        f"ledger-page:{source.pk}:{before}",
        [DATA],
        lambda: data_parts.ledger_page(source, before, LEDGER_PAGE),
        keep=lambda page: page["lines"] > 0,
    )
    return render(
        request,
        "runs/source_ledger.html",
        {
            "source": source,
            "page": page,
            "older": page["older"],
            "paged": bool(raw),
            "canonical": _canonical(request),
        },
    )


# A ledger page's entries, and the source page's newest imports: the same few rows to render
# whether the source has published 40 times or 4,000 (the ledger pages through the rest).
LEDGER_PAGE = 25
SOURCE_IMPORTS_SHOWN = 20


@require_safe
@public_page
def source_detail(request: HttpRequest, slug: str) -> HttpResponse:
    source = get_object_or_404(Source, slug=slug)
    # Its counts (over every revision of its runs), newest imports and revisions read the run
    # data only: counted and rendered once per data change.
    summary = cached(
        f"source-summary:{source.pk}",
        [DATA],
        lambda: data_parts.source_summary(source, SOURCE_IMPORTS_SHOWN),
    )
    return render(
        request,
        "runs/source_detail.html",
        {"source": source, "summary": summary, "canonical": _canonical(request)},
    )


@require_safe
@public_page
def gpu_detail(request: HttpRequest, slug: str) -> HttpResponse:
    gpu = get_object_or_404(Gpu, slug=slug)
    # The benchmarks run on it with their current runs (a few hundred list items) read the
    # run data only: rendered once per data change.
    benchmarks = cached(
        f"gpu-benchmark-list:{gpu.pk}", [DATA], lambda: data_parts.gpu_benchmarks(gpu)
    )
    return render(
        request,
        "runs/gpu_detail.html",
        {
            "gpu": gpu,
            "benchmarks": benchmarks,
            "canonical": _canonical(request),
        },
    )

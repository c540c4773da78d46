"""The run page's "Replications and notes" section, registered with runs.extensions."""

from __future__ import annotations

import statistics

from django.http import HttpRequest

from attestations.models import Attestation, Report
from runs.extensions import RunPanel
from runs.read.freshness import activity_of, cached


def _has_activity(run) -> bool:
    """Whether anything was ever written about this run (runs.read.freshness.run_activity, set
    by the run page): most runs have nothing, and their pages then ask nothing."""
    activity = getattr(run, "activity", None)
    return activity is None or activity > 0


def _visible(request: HttpRequest, run) -> list:
    """The run's items this reader sees (approved, and their own pending ones), asked once a
    page: both panels show them, the measured table those approved with a result file."""
    if not hasattr(run, "visible_attestations"):
        # Not even built for a run with no activity: building it costs more than the panel.
        run.visible_attestations = (
            list(Attestation.objects.visible_to(request.user).for_run(run).with_related())
            if _has_activity(run)
            else []
        )
    return run.visible_attestations


def run_section(request: HttpRequest, run) -> dict:
    """Approved items for everyone, plus the viewer's own pending ones, and the reports the
    maintainers answered in public. At most two queries whatever the number of items."""
    user = request.user
    items = _visible(request, run)
    answered = (
        list(Report.objects.for_run(run).answered_publicly().in_answer_order())
        if _has_activity(run)
        else []
    )
    return {
        "run": run,
        "items": items,
        "approved": sum(1 for item in items if item.state == "approved"),
        "answered_reports": answered,
        "user": user,
    }


PANEL = RunPanel(
    name="replications",
    slot="sections",
    template="attestations/_run_section.html",
    context=run_section,
    order=10,
    # Signed-in readers get the request form or their own pending items; everyone else
    # sees what the data says.
    same_for_every_anonymous_reader=True,
)


def run_measured(request: HttpRequest, run) -> dict:
    """Approved measured reproductions, for the table beside the controlled reruns: of the
    items the section below shows (Attestation.measured() says which), so no query of its own."""
    items = [i for i in _visible(request, run) if i.state == "approved" and i.result_digest]
    return {"run": run, "items": items}


MEASURED_PANEL = RunPanel(
    name="measured",
    slot="evidence",
    template="attestations/_run_measured.html",
    context=run_measured,
    order=20,
    same_for_every_anonymous_reader=True,
)


def benchmarks_with_measured() -> frozenset[int]:
    """Benchmarks (by pk) with any approved measured reproduction, kept under the version of
    every attestations write: the pages of the others ask nothing."""
    return cached(
        "attestations:benchmarks-with-measured",
        [activity_of("attestations")],
        lambda: Attestation.objects.approved().measured().benchmark_ids(),
    )


def benchmark_measured(request: HttpRequest, benchmark) -> dict:
    """Per GPU product: how many approved measured reproductions the benchmark's runs have,
    and how far their medians lie from the published ones measured on that same product."""
    if benchmark.pk not in benchmarks_with_measured():
        return {"rows": []}
    items = Attestation.objects.approved().measured().for_benchmark(benchmark)
    by_product: dict[str, list] = {}
    for item in items.with_related():
        product = item.gpu.product if item.gpu else "CPU (scaled-down shapes)"
        by_product.setdefault(product, []).append(item)
    rows = []
    for product, group in sorted(by_product.items()):
        deltas = sorted(d for d in (i.delta_percent() for i in group) if d is not None)
        rows.append(
            {
                "product": product,
                "count": len(group),
                "runs": len({i.run_id for i in group}),
                "compared": len(deltas),
                "low": deltas[0] if deltas else None,
                "median": statistics.median(deltas) if deltas else None,
                "high": deltas[-1] if deltas else None,
            }
        )
    return {"rows": rows}


BENCHMARK_PANEL = RunPanel(
    name="measured-by-gpu",
    slot="benchmark",
    template="attestations/_benchmark_measured.html",
    context=benchmark_measured,
    order=10,
    same_for_every_anonymous_reader=True,
    reads=(activity_of("attestations"),),
)

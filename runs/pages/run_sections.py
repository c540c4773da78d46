"""The sections of a run page that read the run data only: the run with its catalogue rows, the
cell's history around this run (and its chart), the leader of its group, its evidence verdict
and the canonical manifest, rendered. Computed, they are a few queries on indexes (the history
reads a window around the run, not the whole cell); they read the run data only, so they are
kept under its version (runs.read.freshness.cached) and a write about this or any run (an
attestation, a job) leaves them kept: the page renders its panels around them.
"""

from __future__ import annotations

import json
from html import escape

from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from runs.changes import detect
from runs.changes.models import CellChange
from runs.claims import read as claims
from runs.manifest.canonical import run_manifest
from runs.models import Evidence, EvidenceEvent, Run, Source
from runs.pages import charts, history_chart
from runs.pages.units import scale
from runs.querysets import public_id_or_404
from runs.read import catalogue
from runs.read.freshness import DATA, cached
from runs.reference.catalogue import param_order
from runs.reference.plausibility import floor_for

# Points of the cell's history shown on the run page: the run and its neighbours, up to this
# many in all; the history page (/runs/<id>/history/) pages through every one.
HISTORY_SHOWN = 24


def page(public_id: str, verdict, quiet_panels=None) -> dict:
    """The current run of this id with its catalogue rows, its manifest, and the page's
    sections that read the run data only, rendered: kept under the data's version by the id in
    this process, so a reader of a page it served before pays no query for any of them, only
    for what else the page shows (its panels, the access date, the frame). `verdict(run)` is
    the evidence event behind the level. `quiet_panels(run)`, where given, renders the panels
    of a run nothing was written about as every anonymous reader sees them
    (RunExtensions.quiet_panels): kept with the sections, as "quiet_panels" (None where the
    first reader after a data change had none to give). A 404 for an id that names no
    current run (never kept)."""

    def compute() -> dict:
        run, leader, has_claims = Run.objects.run_page_or_404(public_id)
        # Its catalogue rows are those of many other runs: kept apart, under the data version.
        catalogue.attach_kept([run])
        manifest = manifest_json(run)
        context = {
            "run": run,
            "history": history(run),
            "leader": leader,
            # The judged claims this run is a side of, the winner's page too, asked for only
            # where there is one (few runs have any).
            "claims": claims.of_run(run.group_id, run.pk) if has_claims else [],
            **_verdicts(run, verdict(run)),
            "plausibility": dict(zip(("floor", "reason"), floor_for(run), strict=True)),
            "parameters": _ordered_params(run.workload.parameters),
            "tensors": sorted(run.workload.tensors, key=lambda t: t["name"]),
            "manifest_json": manifest,
        }
        sections = {name: render_to_string(f"runs/{t}", context) for name, t in SECTIONS.items()}
        # Panels read no run data the sections do not, so they go stale with them or with a
        # write about the run, which the run page checks before using them.
        panels = quiet_panels(run) if quiet_panels else None
        return {"run": run, "sections": sections, "manifest_json": manifest,
                "quiet_panels": panels}  # fmt: skip

    # Any write to the run data moves the version, so a kept run is still the current one.
    # Kept in this process only: readers arriving from links each ask for another run, so
    # storing every cold page's 30 KB in the shared cache cost each a round trip and Redis its
    # work (about 8 % of the random run page's throughput at 1M runs, measured at 164d472)
    # for an entry another process seldom reads. Anonymous readers of a page asked for before
    # get it whole from the shared page cache; this copy serves the same process's signed-in
    # readers, the manifest and the page after a write about the run.
    return cached(f"run-page:{public_id_or_404(public_id)}", [DATA], compute, shared=False)


# The run page's sections that read the run data only (run_detail.html places them between
# the panels, the citation with its access date and the site's frame).
SECTIONS = {
    "lead": "_run_lead.html",  # the title, primary measurement, identity and correctness
    "verdict": "_evidence.html",  # the evidence level and the verdict behind it
    "details": "_run_details.html",  # workload, measurements with the history, protocol...
    "manifest": "_run_manifest.html",
}


def _ordered_params(params: dict) -> list[tuple[str, object]]:
    return [(k, params[k]) for k in sorted(params, key=param_order) if k != "dtype"]


def _verdicts(run: Run, latest: EvidenceEvent | None) -> dict:
    """The newest rerun's verdict, and the one the level rests on where the newest did not
    move it (a reproduced run whose later process could only check: the badge says
    reproduced, and the page says which rerun found that)."""
    return {"verdict": latest, "verdict_basis": EvidenceEvent.objects.basis_of(run, latest)}


def history(run: Run) -> dict:
    """Up to HISTORY_SHOWN points of the cell's history around this run, oldest first, how
    many there are in all and from which sources, their chart, and the changes detected
    among them (runs/changes/)."""
    return _history(run)


def _history(run: Run) -> dict:
    before, after, per_source = Run.objects.history_window(run, HISTORY_SHOWN)
    n_after = min(len(after), HISTORY_SHOWN - min(len(before), HISTORY_SHOWN // 2))
    points = before[: HISTORY_SHOWN - n_after][::-1] + after[:n_after]
    counted = _per_source(run, before + after, per_source)
    # Publications per source, so the heading and the counts name what the points are.
    sources = [(name, slug, n) for _, name, slug, n in counted]
    total = sum(n for _, _, n in sources)
    part = {"points": points, "list": _items(run, points), "total": total, "sources": sources,
            "svg": "", "changes": [], "heading": "History of this cell"}  # fmt: skip
    if total > 1:
        part["heading"] += f" across {total} publications of " + ", ".join(
            f"{name} ({n})" if len(sources) > 1 else name for name, _, n in sources
        )
    if len(points) > 1:
        part.update(_judged(run, points, {source_id: n for source_id, _, _, n in counted}))
    return part


def _items(run: Run, points: list[dict]) -> SafeString:
    """The history list's items, one per point, oldest first: the run's own in bold, every
    other a link to its page. Written here rather than by a loop of the template: two dozen
    items of four variables each were two thirds of the history section's rendering, which
    every reader arriving at a run nobody asked for pays (the section took 0.55-0.74 ms with
    the loop, 0.20-0.22 ms this way, in process at 80k runs). The same escaping and figures
    (units.scale, as the `measure` filter) as the template's."""
    unit = run.unit
    return mark_safe(  # noqa: S308 - every value placed is escaped here
        "".join(
            f"<li><strong>{escape(p['publication__slug'])}: "
            f"{escape(scale(p['median'], unit))} (this run)</strong></li>"
            if p["pk"] == run.pk
            else f'<li><a href="/runs/{escape(p["public_id"])}/">{escape(p["publication__slug"])}'
            f"</a>: {escape(scale(p['median'], unit))}</li>"
            for p in points
        )
    )


def _per_source(run: Run, points: list[dict], counts: dict[int, int]) -> list[tuple]:
    """(source id, name, slug, points) of each source of the cell, by name. Each point is
    given its source's name and slug here: the run's own source (attached with its catalogue
    rows) for most cells, a primary-key query for any other, not a join."""
    sources = {run.source_id: run.source}
    others = set(counts) - set(sources)
    sources.update(Source.objects.in_bulk(others) if others else {})
    for p in points:
        source = sources[p["source_id"]]
        p.update(source__name=source.name, source__slug=source.slug)
    named = [(pk, sources[pk].name, sources[pk].slug, n) for pk, n in counts.items()]
    return sorted(named, key=lambda s: s[1:3])


def _judged(run: Run, points: list[dict], per_source: dict[int, int]) -> dict:
    """The cell's detected changes among the points shown, its status under the rule, and
    the chart that draws them with the tolerance band and a controlled rerun's median."""
    at = {p["publication_id"]: i for i, p in enumerate(points)}
    changes, series = _detected(run, points, per_source)
    rerun = _rerun(run)
    factor, unit_name = charts.unit_scale(run.unit, [p["median"] for p in points])
    svg = history_chart.history_chart(
        chart_id="history",
        title=f"{run.get_metric_display()} median of this cell in {len(points)} publications, "
        "oldest first",
        points=[(p["publication__slug"], p["median"]) for p in points],
        current=next((i for i, p in enumerate(points) if p["pk"] == run.pk), None),
        y_scale=factor,
        y_unit=unit_name,
        y_label=f"{run.get_metric_display()} median",
        bands=_baselines(changes, at),
        marks=[
            history_chart.Mark(at[c.publication_id], c.kind, c.direction, c.shift) for c in changes
        ],
        rerun=rerun,
    )
    return {"svg": svg, "changes": changes, "status": series, "rerun": rerun}


def _baselines(changes: list, at: dict[int, int]) -> list[history_chart.Band]:
    """Each change's tested baseline as the chart draws it: the median before it ± the
    threshold the rule applied, over the points it was taken from (up to detect.WINDOW before
    the change, back to the last lasting step; runs/changes/detect.py, step 3), among those
    shown."""
    bands, last_step = [], 0
    for c in sorted(changes, key=lambda c: at[c.publication_id]):
        end = at[c.publication_id]
        start = max(0, end - detect.WINDOW, last_step)
        if end > start:
            bands.append(
                history_chart.Band(start, end, c.before * (1 - c.threshold),
                                   c.before * (1 + c.threshold), c.publication_slug)
            )  # fmt: skip
        if c.kind == CellChange.STEP:
            last_step = end
    return bands


def _detected(run: Run, points: list[dict], per_source: dict[int, int]) -> tuple[list, str | None]:
    """The changes the rule found among the points and the cell's status (None: too short).
    The rule stores nothing for a source's cell of MIN_BASELINE publications or fewer
    (runs.changes.services): when every source of the points has no more runs than that in
    the cell, both are known without a query."""
    source_ids = {p["source_id"] for p in points}
    if all(per_source.get(s, 0) <= detect.MIN_BASELINE for s in source_ids):
        return [], None
    key = {"source_ids": source_ids, "cell_key": run.group.cell_key,
           "provider_key": run.implementation.provider_key}  # fmt: skip
    slugs = {p["publication_id"]: p["publication__slug"] for p in points}
    # Each change comes with the sizes of the group it moved with (`together`).
    changes, series = CellChange.objects.at_points(**key, publication_ids=slugs)
    for c in changes:
        c.publication_slug = slugs[c.publication_id]  # the page names the points by slug
    return changes, series


def _rerun(run: Run) -> history_chart.Rerun | None:
    """The newest controlled rerun's median of this run, for the chart (another mark)."""
    if run.evidence == Evidence.REPORTED and run.revision == 1:
        return None  # every rerun's evidence event moves the level: this run has had none
    if run.source.slug == "kernelindex":
        return None  # a controlled run's level never moves (runs.evidence.evidence_apply)
    row = EvidenceEvent.objects.newest_rerun_median(run)
    if row is None:
        return None
    return history_chart.Rerun(float(row[0]), f"controlled rerun on {row[1]}")


def manifest_json(run: Run) -> str:
    """The manifest as the page shows it."""
    return json.dumps(run_manifest(run), indent=2, ensure_ascii=False)

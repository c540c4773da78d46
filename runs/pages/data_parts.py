"""The parts of the source, ledger, GPU and group pages that read the run data only, rendered.

Each part is the bulk of its page (a GPU page lists a few hundred benchmarks, a ledger page 25
entries of ten columns each, a group page its heading, ranking and judged claims), and the
same for every reader until the run data changes: the views keep them under the data's version
(runs.read.freshness.cached), so a reader pays a cache lookup, not a template loop over rows and
the model instances behind it, and only the first reader after an ingest renders them. What
varies per request (the focused bar of a group's chart, a ledger page's "newest" link) stays
in the view.
"""

from __future__ import annotations

from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from runs.models import Benchmark, ComparisonGroup, ImportRecord, Publication, Run, Tally
from runs.pages.ledger import ledger_lines, upstream_file


def _rendered(template: str, context: dict) -> SafeString:
    return mark_safe(render_to_string(template, context))


def gpu_benchmarks(gpu) -> SafeString:
    """The GPU page's list items: each benchmark with current runs on the GPU, by title, from
    the tallies the write side keeps (a few rows, so rendering it counts no run)."""
    per_benchmark = Tally.objects.per_benchmark_on(gpu)
    benchmarks = [
        {"slug": slug, "title": title, "n": per_benchmark[pk]}
        for pk, slug, title in Benchmark.objects.titles_of(per_benchmark)
    ]
    return _rendered("runs/_gpu_benchmarks.html", {"gpu": gpu, "benchmarks": benchmarks})


def source_summary(source, imports_shown: int) -> dict:
    """A source page's counts (over every revision of its runs), its newest imports' table
    rows and its revised runs."""
    imports = ImportRecord.objects.newest_of(source, imports_shown)
    for row in imports:
        row["file_name"], row["file_url"] = upstream_file(
            source.slug, row["location"], row["upstream_commit"]
        )
    revisions = Run.objects.revisions_of(source)[:50]
    return {
        "stats": Run.objects.count_of_source(source),
        "publications": Publication.objects.of_source(source).count(),
        "imports_shown": len(imports),
        "imports": _rendered("runs/_source_imports.html", {"imports": imports}),
        "revisions": _rendered("runs/_source_revisions.html", {"revisions": revisions}),
    }


def ledger_page(source, before: int | None, size: int) -> dict:
    """A ledger page's table rows (its entries older than entry `before`, newest first) and
    the entry its "older" link starts before (None on the last page)."""
    entries = ImportRecord.objects.page_of(source, before, size)
    lines = ledger_lines(source.slug, entries[:size])
    return {
        "rows": _rendered("runs/_ledger_rows.html", {"lines": lines}),
        "lines": len(lines),
        "older": entries[size - 1].pk if len(entries) > size else None,
    }


def group_page(group) -> dict:
    """A group page's heading (what the group shares), table rows, judged claims and link to
    its benchmark, rendered; its chart's bars as (label, median, run id) in rank order and
    their unit."""
    named = ComparisonGroup.objects.with_related().get(pk=group.pk)
    runs = Run.objects.public().in_groups([group]).ranked().ranking_rows()
    return {
        "heading": _rendered("runs/_group_heading.html", {"group": named}),
        "rows": _rendered("runs/_group_rows.html", {"runs": runs}),
        "claims": _rendered("claims/_group_claims.html", {"group": group}),
        "more": _rendered("runs/_group_more.html", {"group": named}),
        "bars": [(f"#{r['rank']} {r['implementation_name']}", r["median"], r["public_id"])
                 for r in runs],
        "unit": runs[0]["unit"] if runs else "ns",
    }  # fmt: skip

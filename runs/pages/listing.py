"""What a listing page renders besides its query: the runs' table rows and the filter form's
options.

The browse query loads only ids and the sort key. Each run's table row reads its run's data
only: it is kept under the run data's version (runs.read.freshness.cached_many), and the rows not
kept are loaded whole, with their catalogue rows, in one query on the primary key and rendered. The filter form's selects
list hundreds of benchmarks: their options are rendered once per version of the run data
(runs.read.freshness.cached) and the chosen one marked by a string edit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache

from django.template.loader import get_template
from django.utils.html import escape, format_html_join
from django.utils.safestring import SafeString, mark_safe

from runs.models import Benchmark, Gpu, Run, Source
from runs.read import catalogue
from runs.read.filters import RunFilter
from runs.read.freshness import DATA, cached, cached_many

ROW_TEMPLATE = "runs/_run_row.html"


def _complete(run: Run) -> bool:
    # The browse query loads only the id and sort key; other pages pass runs they loaded whole.
    return "public_id" not in run.get_deferred_fields()


def table_rows(runs: Iterable[Run]) -> SafeString:
    """The <tr> of each run, in order: each row reads its run's data only, so it is kept
    under the run data's version; the rows not kept are loaded in one query and rendered."""
    given = {run.pk: run for run in runs}
    template = get_template(ROW_TEMPLATE)

    def build(missing: list[int]) -> dict[int, str]:
        whole = [given[pk] for pk in missing if _complete(given[pk])]
        partial = [pk for pk in missing if not _complete(given[pk])]
        if partial:
            whole += Run.objects.with_ids(partial).for_listing()
        catalogue.attach(whole)
        return {run.pk: template.render({"r": run}) for run in whole}

    rows = cached_many("run-row", list(given), [DATA], build)
    return mark_safe("".join(rows[pk] for pk in given if pk in rows))


def _mark(options: str, chosen: str | None) -> SafeString:
    """The options with `chosen` selected: the escaped value is matched whole, quotes and all,
    so only the option with exactly that value is marked, and an unknown value marks none."""
    if chosen is not None:
        value = f'<option value="{escape(chosen)}">'
        options = options.replace(value, f"{value[:-1]} selected>", 1)
    return mark_safe(options)


def _catalogue_options() -> dict[str, str]:
    lists = {
        "benchmark": sorted(Benchmark.objects.all(), key=lambda row: row.title),
        "gpu": list(Gpu.objects.measured()),
        "source": sorted(Source.objects.all(), key=lambda row: row.name),
    }
    labels = {"benchmark": "title", "gpu": "upstream_name", "source": "name"}
    return {
        name: format_html_join(
            "",
            '<option value="{}">{}</option>',
            ((row.slug, getattr(row, label)) for row in lists[name]),
        )
        for name, label in labels.items()
    }


def catalogue_options(chosen: Mapping[str, str]) -> dict[str, SafeString]:
    """The benchmark, GPU and source selects' options (after each one's "any" option), the
    values `chosen` names (the filter's data) marked: one lookup of what is kept for all three."""
    options = cached("browse-options", [DATA], _catalogue_options)
    return {name: _mark(text, chosen.get(name) or None) for name, text in options.items()}


@cache
def _choice_options(name: str) -> str:
    # Fixed choices (timed pass, metric, evidence, sort order), the empty one first, exactly as
    # the filter's own widget lists them.
    return format_html_join(
        "",
        '<option value="{}">{}</option>',
        ((value, str(label)) for value, label in RunFilter().form.fields[name].choices),
    )


def choice_options(name: str, chosen: str | None) -> SafeString:
    """The options of a fixed-choice select (pass, metric, evidence, sort order)."""
    return _mark(_choice_options(name), chosen or "")

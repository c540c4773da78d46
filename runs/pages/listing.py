"""What a listing page renders besides its query: the runs' table rows and the filter form's
options, both made once per data change rather than once per request.

A listing's rows are the same on every page that shows them until the data changes, so each
run's row is kept in the process (freshness.kept_per_data_change) and a page asks for fifty at
once. The browse query then loads only ids and the sort key; the runs whose rows are not kept
are loaded in full here, in one query. The filter form's selects list hundreds of benchmarks:
their options are rendered once per data change and the chosen one marked by a string edit.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from django.template.loader import get_template
from django.utils.html import escape, format_html_join
from django.utils.safestring import SafeString, mark_safe

from runs.models import Run
from runs.read import memo
from runs.read.filters import RunFilter
from runs.read.freshness import kept_per_data_change, once_per_data_change

ROW_TEMPLATE = "runs/_run_row.html"


def _complete(run: Run) -> bool:
    # The browse query loads only the id and sort key; other pages pass runs they loaded whole.
    return "public_id" not in run.get_deferred_fields()


def table_rows(runs: Iterable[Run]) -> SafeString:
    """The <tr> of each run, in order."""
    given = {run.pk: run for run in runs}
    template = get_template(ROW_TEMPLATE)

    def build(missing: list[int]) -> dict[int, str]:
        whole = [given[pk] for pk in missing if _complete(given[pk])]
        partial = [pk for pk in missing if not _complete(given[pk])]
        if partial:
            whole += Run.objects.filter(pk__in=partial).for_listing()
        memo.attach(whole)
        return {run.pk: template.render({"r": run}) for run in whole}

    rows = kept_per_data_change("run-row", list(given), build)
    return mark_safe("".join(rows[pk] for pk in given if pk in rows))


def _mark(options: str, chosen: str | None) -> SafeString:
    """The options with `chosen` selected: the escaped value is matched whole, quotes and all,
    so only the option with exactly that value is marked, and an unknown value marks none."""
    if chosen is not None:
        value = f'<option value="{escape(chosen)}">'
        options = options.replace(value, f"{value[:-1]} selected>", 1)
    return mark_safe(options)


def _catalogue_options() -> dict[str, str]:
    lists = memo.lists()
    labels = {"benchmark": "title", "gpu": "upstream_name", "source": "name"}
    return {
        name: format_html_join(
            "",
            '<option value="{}">{}</option>',
            ((row.slug, getattr(row, label)) for row in lists[name]),
        )
        for name, label in labels.items()
    }


def catalogue_options(name: str, chosen: str | None) -> SafeString:
    """The benchmark, GPU or source select's options (after its own "any" option)."""
    options = once_per_data_change("browse-options", _catalogue_options)[name]
    return _mark(options, chosen or None)


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

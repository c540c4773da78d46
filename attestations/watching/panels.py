"""The run page's "Watch" section, registered with runs.extensions: watch this run's cell,
its benchmark or its source, and the Atom feeds of their detected changes."""

from __future__ import annotations

from django.http import HttpRequest

from attestations.watching.models import Watch
from runs.extensions import RunPanel


def watch_section(request: HttpRequest, run) -> dict:
    """What the reader already watches of these three targets: one query when signed in."""
    watching: set[str] = set()
    if request.user.is_authenticated:
        mine = Watch.objects.of_user(request.user).run_page_targets()
        for target, bench, source, cell, provider in mine:
            if (target, bench) == ("benchmark", run.benchmark_id):
                watching.add("benchmark")
            elif (target, source) == ("source", run.source_id):
                watching.add("source")
            elif (cell, provider) == (run.group.cell_key, run.implementation.provider_key):
                watching.add("cell")
    return {"run": run, "watching": watching, "user": request.user}


PANEL = RunPanel(
    name="watching",
    slot="sections",
    template="attestations/watching/_run_section.html",
    context=watch_section,
    order=90,
    same_for_every_anonymous_reader=True,
)

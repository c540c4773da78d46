"""The one extension point of runs: the run page, the Run admin, every page's header and
footer, and the demo data.

`runs` is the public record; `attestations` and `reruns` add to it: sections of the run page
(replications and notes, controlled reruns) and actions in the Run admin (order a rerun). They
register those here from their AppConfig.ready(), and `runs` shows whatever is registered, so
`runs` never imports, loads the template tags of, or patches anything of the apps built on it
(dependencies point one way: docs/architecture.md).

Every page's header and footer have slots too (SITE_SLOTS): an app adds a fragment to them
(the account links) by registering its template, and templates/base.html includes whatever is
registered, through the `site_slots` context processor below.

An app that ships demo data registers a DemoLoader; `manage.py demo` loads the upstream
sources and then calls every registered loader in order, so runs never calls another app's
command by name.

A panel is a template and a function that gives it its context. The function runs once per
uncached page view, so it should cost a fixed number of queries whatever the data size, and
none for a run nothing was written about (`run.activity == 0`, runs.read.freshness). A panel
declares `same_for_every_anonymous_reader` when its output for a reader who is not signed in
depends on the run and the versions the run page reads only (no form, no message, no
per-reader state): the page it is on is then shared in the page cache like any other.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from runs.read.freshness import cached, run_page

# Where on the run page a panel goes: inside the Evidence section, under the level and its
# verdict; or as a section of its own after the measurements.
SLOTS = ("evidence", "sections")
# A benchmark page's panels, after its tables: their context function gets the benchmark.
BENCHMARK_SLOT = "benchmark"
# Every page's: the end of the site header (after the site's own links) and the footer.
SITE_SLOTS = ("header", "footer")


@dataclass(frozen=True)
class RunPanel:
    name: str
    slot: str
    template: str
    context: Callable[[HttpRequest, object], dict]
    order: int = 100
    same_for_every_anonymous_reader: bool = False
    # The versions its output reads beyond its page's own (runs.read.freshness): a benchmark
    # panel that sums up an app's rows names that app's activity.
    reads: tuple[str, ...] = ()


@dataclass(frozen=True)
class DemoLoader:
    """`load(data)` loads an app's demo data from the shipped data folder; idempotent."""

    name: str
    load: Callable[[Path], None]
    order: int = 100


class RunExtensions:
    def __init__(self) -> None:
        self._panels: dict[str, RunPanel] = {}
        self._admin_actions: list[Callable] = []
        self._demo_loaders: dict[str, DemoLoader] = {}
        self._site_fragments: dict[str, list[str]] = {slot: [] for slot in SITE_SLOTS}

    def register_site_fragment(self, slot: str, template: str) -> None:
        """Include `template` in every page's `slot` (rendered with the page's context)."""
        if slot not in SITE_SLOTS:
            raise ImproperlyConfigured(
                f"Site fragment {template!r}: slot must be one of {SITE_SLOTS}."
            )
        if template not in self._site_fragments[slot]:
            self._site_fragments[slot].append(template)

    def site_fragments(self) -> dict[str, list[str]]:
        return {slot: list(templates) for slot, templates in self._site_fragments.items()}

    def register_demo_loader(self, loader: DemoLoader) -> None:
        if loader.name in self._demo_loaders:
            raise ImproperlyConfigured(f"Demo loader {loader.name!r} is registered twice.")
        self._demo_loaders[loader.name] = loader

    def demo_loaders(self) -> list[DemoLoader]:
        return sorted(self._demo_loaders.values(), key=lambda d: (d.order, d.name))

    def register_panel(self, panel: RunPanel) -> None:
        if panel.slot not in (*SLOTS, BENCHMARK_SLOT):
            raise ImproperlyConfigured(
                f"Run page panel {panel.name!r}: slot must be one of {SLOTS} or {BENCHMARK_SLOT!r}."
            )
        if panel.name in self._panels:
            raise ImproperlyConfigured(f"Run page panel {panel.name!r} is registered twice.")
        self._panels[panel.name] = panel

    def register_admin_action(self, action: Callable) -> None:
        if action not in self._admin_actions:
            self._admin_actions.append(action)

    def admin_actions(self) -> list[Callable]:
        return list(self._admin_actions)

    def panels(self, slot: str) -> list[RunPanel]:
        return sorted(
            (p for p in self._panels.values() if p.slot == slot), key=lambda p: (p.order, p.name)
        )

    def render_panels(self, request: HttpRequest, run, quiet=None) -> dict[str, list[SafeString]]:
        """Each slot's panels, rendered in order, for the run page's template to place. For a
        reader who is not signed in, when every panel is the same for all of them: `quiet`
        where the run page's sections were kept with them (quiet_panels) and nothing was
        written about the run since, else kept under the versions the run page reads (its
        run's activity among them)."""
        if not self._shared() or request.user.is_authenticated:
            return self._render_slots(request, run)
        if quiet is not None and run.activity == 0:
            return quiet
        return cached(
            f"run-panels:{run.pk}",
            run_page(run.public_id),
            lambda: self._render_slots(request, run),
        )

    def quiet_panels(self, request: HttpRequest, activity: int):
        """For the run page to render with its sections, and keep with them: a function of the
        run giving its panels as every reader who is not signed in sees them while nothing is
        written about it (`activity` 0), or None where this reader's would not be those. A
        reader arriving at a run nobody asked for then pays one cache lookup and one store for
        the page, not two of each."""
        if activity != 0 or not self._shared() or request.user.is_authenticated:
            return None

        def render(run) -> dict[str, list[SafeString]]:
            # On a copy: a panel's context may leave what it read on the run (the replications
            # panel its visible items), and the run is kept with the sections, for pages read
            # after a write about it too.
            quiet = copy.copy(run)
            quiet.activity = activity
            return self._render_slots(request, quiet)

        return render

    def _render_slots(self, request: HttpRequest, run) -> dict[str, list[SafeString]]:
        return {slot: [self._render(p, request, run) for p in self.panels(slot)] for slot in SLOTS}

    def _shared(self) -> bool:
        return all(p.same_for_every_anonymous_reader for s in SLOTS for p in self.panels(s))

    def benchmark_reads(self) -> tuple[str, ...]:
        """The versions the benchmark page's panels read (freshness.benchmark_page)."""
        return tuple(s for p in self.panels(BENCHMARK_SLOT) for s in p.reads)

    def render_benchmark_panels(self, request: HttpRequest, benchmark) -> list[SafeString]:
        return [self._render(p, request, benchmark) for p in self.panels(BENCHMARK_SLOT)]

    def _render(self, panel: RunPanel, request: HttpRequest, subject) -> SafeString:
        return render_to_string(panel.template, panel.context(request, subject), request=request)


run_extensions = RunExtensions()


def site_slots(request: HttpRequest) -> dict:
    """Context processor: the templates registered for each of every page's slots."""
    return {"site_slots": run_extensions.site_fragments()}

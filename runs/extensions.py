"""The run page's and the Run admin's one extension point.

`runs` is the public record; `attestations` and `reruns` add to it: sections of the run page
(replications and notes, controlled reruns) and actions in the Run admin (order a rerun). They
register those here from their AppConfig.ready(), and `runs` shows whatever is registered, so
`runs` never imports, loads the template tags of, or patches anything of the apps built on it
(dependencies point one way: docs/architecture.md).

A panel is a template and a function that gives it its context. The function runs once per
uncached page view, so it should cost a fixed number of queries whatever the data size. A
panel that declares `same_for_every_anonymous_reader` (its output for a reader who is not
signed in depends on the run and the data only: no form, no message, no per-reader state) is
rendered once per run and data change for them and kept in the process's fragment cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from runs.read.freshness import cached_per_data_change

# Where on the run page a panel goes: inside the Evidence section, under the level and its
# verdict; or as a section of its own after the measurements.
SLOTS = ("evidence", "sections")
# A benchmark page's panels, after its tables: their context function gets the benchmark.
BENCHMARK_SLOT = "benchmark"


@dataclass(frozen=True)
class RunPanel:
    name: str
    slot: str
    template: str
    context: Callable[[HttpRequest, object], dict]
    order: int = 100
    same_for_every_anonymous_reader: bool = False


class RunExtensions:
    def __init__(self) -> None:
        self._panels: dict[str, RunPanel] = {}
        self._admin_actions: list[Callable] = []

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

    def render_panels(self, request: HttpRequest, run) -> dict[str, list[SafeString]]:
        """Each slot's panels, rendered in order, for the run page's template to place."""
        return {slot: [self._render(p, request, run) for p in self.panels(slot)] for slot in SLOTS}

    def render_benchmark_panels(self, request: HttpRequest, benchmark) -> list[SafeString]:
        return [self._render(p, request, benchmark) for p in self.panels(BENCHMARK_SLOT)]

    def _render(self, panel: RunPanel, request: HttpRequest, subject) -> SafeString:
        def render() -> SafeString:
            return render_to_string(
                panel.template, panel.context(request, subject), request=request
            )

        if panel.same_for_every_anonymous_reader and not request.user.is_authenticated:
            key = f"panel:{panel.name}:{panel.slot}:{subject.pk}"
            return cached_per_data_change(key, render, using="fragments")
        return render()


run_extensions = RunExtensions()

"""Per-process copies of the small catalogue tables that every run row points into.

Sources, publications, benchmarks, implementations (with their projects), protocols and
environments (with their GPUs) are a few hundred rows in all, and the document kinds among them
are immutable (a digest names their content). Joining eight of them onto every run query costs
PostgreSQL more time planning the join than fetching the rows, so pages fetch runs with the
large relations only (workload, group) and attach the rest from here.

The copies are reloaded when the data fingerprint changes (an import, an evidence change, a
moderated attestation), and at once when a run points at a row they lack: an import that
committed within the fingerprint's reuse window.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter

from runs.models import (
    Benchmark,
    Environment,
    Implementation,
    Protocol,
    Publication,
    Run,
    Source,
)
from runs.read.freshness import data_fingerprint

# The relations attach() fills; querysets select_related everything else they need.
ATTACHED = ("source", "publication", "benchmark", "implementation", "protocol", "environment")

_state: dict = {"fingerprint": None, "tables": None, "lists": None}


def _load() -> dict[str, dict]:
    sources = {o.pk: o for o in Source.objects.all()}
    publications = {o.pk: o for o in Publication.objects.all()}
    for pub in publications.values():
        pub.source = sources[pub.source_id]
    return {
        "source": sources,
        "publication": publications,
        "benchmark": {o.pk: o for o in Benchmark.objects.all()},
        "implementation": {o.pk: o for o in Implementation.objects.select_related("project")},
        "protocol": {o.pk: o for o in Protocol.objects.all()},
        "environment": {o.pk: o for o in Environment.objects.select_related("gpu")},
    }


def tables(*, force: bool = False) -> dict[str, dict]:
    fingerprint, _ = data_fingerprint()
    if force or _state["tables"] is None or _state["fingerprint"] != fingerprint:
        _state.update(tables=_load(), fingerprint=fingerprint, lists=None)
    return _state["tables"]


def lists() -> dict[str, list]:
    """The catalogue as pages list it: benchmarks by title, the GPUs some environment names by
    vendor and product, sources by name. Sorted once per reload of the copies, not per page."""
    current = tables()
    if _state["lists"] is None:
        gpus = {env.gpu_id: env.gpu for env in current["environment"].values()}
        _state["lists"] = {
            "benchmark": sorted(current["benchmark"].values(), key=attrgetter("title")),
            "gpu": sorted(gpus.values(), key=attrgetter("vendor", "product", "form_factor")),
            "source": sorted(current["source"].values(), key=attrgetter("name")),
        }
    return _state["lists"]


def attach(runs: Iterable[Run]) -> None:
    """Point each run's catalogue relations at the shared copies (no queries when warm)."""
    runs = list(runs)
    current = tables()
    missing = any(
        getattr(run, f"{name}_id") not in current[name] for run in runs for name in ATTACHED
    )
    if missing:
        current = tables(force=True)
    for run in runs:
        for name in ATTACHED:
            setattr(run, name, current[name][getattr(run, f"{name}_id")])


def reset() -> None:
    _state.update(fingerprint=None, tables=None, lists=None)

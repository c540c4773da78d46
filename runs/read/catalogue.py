"""The small catalogue tables that every run row points into: sources, publications,
benchmarks, implementations (with their projects), protocols and environments (with their
GPUs), a few hundred rows in all.

Joined onto a run query they cost PostgreSQL more time planning than running it (nine tables:
9 ms of planning against 0.7 ms of execution for one run at 80k runs), so pages fetch runs
with their large relations only and attach() these in one primary-key query per table, for
the runs shown. A bulk export streams hundreds of thousands of runs: it load()s them whole
once at its start. Nothing here is kept between requests.
"""

from __future__ import annotations

from collections.abc import Iterable

from runs.models import Benchmark, Environment, Implementation, Protocol, Publication, Run, Source


def load() -> dict[str, dict]:
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


# The relations attach() fills; querysets select_related everything else they need.
ATTACHED = ("publication", "benchmark", "implementation", "protocol", "environment")


def attach(runs: Iterable[Run]) -> None:
    """Point each run's catalogue relations at rows fetched for these runs only: one query per
    table on the primary key, whatever the number of runs (nothing kept between requests).
    A run's source is its publication's (the pipeline writes both from one source)."""
    # Runs whose rows are already attached (a page passes them on to its table) ask nothing.
    runs = [run for run in runs if "publication" not in run._state.fields_cache]
    if not runs:
        return
    rows = {
        "publication": Publication.objects.select_related("source"),
        "benchmark": Benchmark.objects.all(),
        "implementation": Implementation.objects.select_related("project"),
        "protocol": Protocol.objects.all(),
        "environment": Environment.objects.select_related("gpu"),
    }
    found = {
        name: query.in_bulk({getattr(run, f"{name}_id") for run in runs})
        for name, query in rows.items()
    }
    others = {run.source_id for run in runs} - {p.source_id for p in found["publication"].values()}
    sources = Source.objects.in_bulk(others) if others else {}
    for run in runs:
        for name in ATTACHED:
            setattr(run, name, found[name][getattr(run, f"{name}_id")])
        publication = run.publication
        run.source = (
            publication.source if publication.source_id == run.source_id else sources[run.source_id]
        )

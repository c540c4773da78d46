"""The small catalogue tables that every run row points into: sources, publications,
benchmarks, implementations (with their projects), protocols and environments (with their
GPUs), a few hundred rows in all.

Joined onto a run query they cost PostgreSQL more time planning than running it (nine tables:
9 ms of planning against 0.7 ms of execution for one run at 80k runs), so pages fetch runs
with their large relations only and attach() these in one primary-key query per table, for
the runs shown. A bulk export streams hundreds of thousands of runs: it load()s them whole
once at its start. A run page computed for the first time (a reader arriving from a link) takes
its five rows from the shared cache instead (attach_kept), kept under the run data's version:
a few hundred rows serve every run, so that page asks for none of them once they are kept.
"""

from __future__ import annotations

from collections.abc import Iterable

from runs.models import Benchmark, Environment, Implementation, Protocol, Publication, Run, Source
from runs.read.freshness import DATA, cached_many


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


def _tables() -> dict:
    return {
        "publication": Publication.objects.select_related("source"),
        "benchmark": Benchmark.objects.all(),
        "implementation": Implementation.objects.select_related("project"),
        "protocol": Protocol.objects.all(),
        "environment": Environment.objects.select_related("gpu"),
    }


def attach(runs: Iterable[Run]) -> None:
    """Point each run's catalogue relations at rows fetched for these runs only: one query per
    table on the primary key, whatever the number of runs (nothing kept between requests).
    A run's source is its publication's (the pipeline writes both from one source)."""
    # Runs whose rows are already attached (a page passes them on to its table) ask nothing.
    runs = [run for run in runs if "publication" not in run._state.fields_cache]
    if not runs:
        return
    found = {
        name: query.in_bulk({getattr(run, f"{name}_id") for run in runs})
        for name, query in _tables().items()
    }
    _point(runs, found)


def attach_kept(runs: Iterable[Run]) -> None:
    """attach(), the rows from the shared cache under the run data's version (one lookup for
    them all, any data change retires them); only the rows not kept yet are fetched, one query
    per table that misses any."""
    runs = [run for run in runs if "publication" not in run._state.fields_cache]
    if not runs:
        return
    wanted = {f"{name}:{getattr(run, f'{name}_id')}" for run in runs for name in ATTACHED}
    rows = cached_many("catalogue", sorted(wanted), [DATA], _fetch)
    found = {name: {} for name in ATTACHED}
    for key, row in rows.items():
        found[key.partition(":")[0]][row.pk] = row
    _point(runs, found)


def _fetch(keys: list[str]) -> dict:
    """{"table:pk": row} of these keys, one query per table named."""
    ids: dict[str, set[int]] = {}
    for key in keys:
        name, _, pk = key.partition(":")
        ids.setdefault(name, set()).add(int(pk))
    tables = _tables()
    return {
        f"{name}:{pk}": row
        for name, pks in ids.items()
        for pk, row in tables[name].in_bulk(pks).items()
    }


def _point(runs: list[Run], found: dict[str, dict]) -> None:
    """Set each run's relations to its rows in `found`; its source is its publication's, asked
    for only where the two differ."""
    others = {run.source_id for run in runs} - {p.source_id for p in found["publication"].values()}
    sources = Source.objects.in_bulk(others) if others else {}
    for run in runs:
        for name in ATTACHED:
            setattr(run, name, found[name][getattr(run, f"{name}_id")])
        publication = run.publication
        run.source = (
            publication.source if publication.source_id == run.source_id else sources[run.source_id]
        )

"""The small catalogue tables that every run row points into, loaded whole for one long read.

Sources, publications, benchmarks, implementations (with their projects), protocols and
environments (with their GPUs) are a few hundred rows in all. A bulk export streams hundreds of
thousands of runs: it loads these once at its start and looks each run's values up here instead
of joining eight tables onto every chunk. Nothing keeps them between requests; pages join what
they show (RunQuerySet.with_catalogue).
"""

from __future__ import annotations

from runs.models import Benchmark, Environment, Implementation, Protocol, Publication, Source


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

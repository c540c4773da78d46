"""Writes to the run data: ingestion, through the one pipeline every source goes through.

The sources are modules under runs/sources/; the pipeline (runs/sources/pipeline.py) turns
their records into documents, runs, groups, ranks and ledger entries.
"""

from __future__ import annotations

from runs.changes.services import changes_detect_after_ingest
from runs.sources import SOURCES, source_module
from runs.sources.base import InputFile
from runs.sources.documents import Resolver, gpu_ensure, implementation_ensure, workload_ensure
from runs.sources.ledger import IngestReport
from runs.sources.pipeline import Progress, ingest_file, public_id_for, source_ensure

__all__ = [
    "SOURCES",
    "IngestReport",
    "InputFile",
    "gpu_ensure",
    "implementation_ensure",
    "ingest",
    "public_id_for",
    "workload_ensure",
]


def ingest(
    *, source_slug: str, locations: list[str], progress: Progress | None = None
) -> list[IngestReport]:
    """Import files of one source; each file whole or not at all, the first bad one ends it."""
    module = source_module(source_slug)
    source = source_ensure(module.SLUG, module.META)
    # One resolver for all files: the 35 CI runs share most of their documents.
    resolver = Resolver()
    reports = [
        ingest_file(source=source, module=module, item=item, progress=progress, resolver=resolver)
        for item in module.inputs(locations)
    ]
    # Once for all files, over the cells they touched: per file would re-read a cell's growing
    # history 35 times when a source's CI runs come in at once.
    changes_detect_after_ingest(source=source, reports=reports)
    return reports

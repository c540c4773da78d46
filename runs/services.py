"""Writes to the run data: ingestion, through the one pipeline every source goes through.

The sources are modules under runs/sources/; the pipeline (runs/sources/pipeline.py) turns
their records into documents, runs, groups, ranks and ledger entries.
"""

from __future__ import annotations

from runs.changes.services import changes_detect_after_ingest
from runs.sources import SOURCES, pipeline, source_module
from runs.sources.base import InputFile, Record
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
    "ingest_records",
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


def ingest_records(
    *, source_slug: str, source_meta: dict, item: InputFile, records: list[Record], trigger: str
) -> IngestReport:
    """Import records a caller built rather than parsed (a verified controlled result: the
    source `kernelindex`, reruns/controlled.py) through the door every file goes through:
    the record checks, the write and ranking, and a ledger entry for `item`.

    No change detection: it compares a source's publications over time, and those of
    `kernelindex` are days of reruns, whose differences are verdicts, not upstream changes."""
    source = source_ensure(source_slug, source_meta)
    return pipeline.ingest_records(source=source, item=item, records=records, trigger=trigger)

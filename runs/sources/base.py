"""What a source gives the pipeline: input files, and the normalised records in each.

A source module turns upstream bytes into `Record`s and nothing else: it never touches the
database. Everything after that (documents and digests, comparison groups, ranks, revisions,
public ids, the ledger) is `runs.sources.pipeline`, the same for every source.

A source module defines (docs/sources.md walks through kernelbench.py):
- `SLUG` and `META` (the Source row: name, description, license, homepage, ...);
- `inputs(locations) -> list[InputFile]`: the command line expanded into files, each naming
  the publication it belongs to;
- `records(item) -> list[Record]`: one file parsed and validated whole, or IngestError.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from runs.sources.parsers import IngestError

__all__ = ["Doc", "IngestError", "InputFile", "Measurement", "Record", "run_name"]

_NOT_NAME = re.compile(r"[^a-z0-9]+")


def run_name(prefix: str, stem: str) -> str:
    """A run's manifest name: lower case, [a-z0-9-] only."""
    return _NOT_NAME.sub("-", f"{prefix}-{stem}".lower())[:120]


@dataclass
class InputFile:
    location: str  # what the user named: a path or a URL
    data: bytes
    publication: str  # the publication's slug: ranks are computed inside one publication
    sequence: int = 0  # upstream order of publications (CI run order)
    upstream_commit: str = ""  # the upstream commit the bytes are from, where known
    upstream_blob: str = ""  # the upstream git blob of the file, where known
    release: str = ""


@dataclass
class Doc:
    """A document a record refers to. `key` names it inside one ingest, so the pipeline builds,
    digests and looks up each distinct document once (canonicalising specs is the costly part
    of an ingest); `build()` returns its (name, title, spec)."""

    key: tuple
    build: Callable[[], tuple[str, str, dict]]


@dataclass
class Measurement:
    statistic: str  # "p20", "std", "min", ...
    value: int | None  # in the record's unit (ns or B)


@dataclass
class Record:
    """One upstream measurement, normalised.

    Values are integers in the run's unit: nanoseconds for latency, bytes for memory.
    `value` is the primary statistic (`statistic`: median for Liger, mean for KernelBench);
    `source_metrics` keeps the source's own numbers verbatim.
    """

    line: int  # where in the file, for error messages
    external_id: str  # the run's identity inside its source; the public id derives from it
    benchmark: str
    timed_pass: str
    metric: str
    unit: str
    value: int | None
    statistic: str
    measurements: list[Measurement]
    source_metrics: dict
    params: dict  # workload parameters
    workload: Doc
    provider: str
    revision: str
    protocol: Doc
    gpu_name: str  # a key of runs.reference.catalogue.GPUS
    environment: Doc
    observed_at: datetime
    name: str
    title: str
    labels: dict = field(default_factory=dict)
    sweep_name: str = ""
    sweep_value: float | None = None
    status: str = "passed"
    benchmark_title: str = ""
    # More keys of the run spec (a controlled run names its job); covered by the digest.
    extra_spec: dict = field(default_factory=dict)

"""Upstream sources: each is one module (see runs/sources/base.py and docs/sources.md).

Adding a source is adding its module here; the pipeline does the rest.
"""

from __future__ import annotations

from types import ModuleType

from runs.sources import kernelbench, liger_bench, liger_ci
from runs.sources.base import IngestError

SOURCES: dict[str, ModuleType] = {m.SLUG: m for m in (liger_bench, liger_ci, kernelbench)}


def source_module(slug: str) -> ModuleType:
    if slug not in SOURCES:
        raise IngestError(slug, [(0, f"unknown source; known: {', '.join(sorted(SOURCES))}")])
    return SOURCES[slug]

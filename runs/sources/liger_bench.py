"""Liger-Kernel's benchmark CSV (benchmark/data/all_benchmark_data.csv): one file, one
publication named after it."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from runs.sources import fetch, liger
from runs.sources.base import InputFile, Record

SLUG = "liger-kernel-bench"
META = {
    "name": "Liger-Kernel benchmarks",
    "description": (
        "The benchmark results Liger-Kernel keeps in its repository "
        "(benchmark/data/all_benchmark_data.csv), written by its benchmark scripts on "
        "contributors' GPUs."
    ),
    "license": liger.LICENSE,
    "homepage": liger.REPOSITORY,
    "harness_repository": liger.REPOSITORY,
    "published_date": date(2026, 8, 20),
}


def inputs(locations: list[str]) -> list[InputFile]:
    files = []
    for location in locations:
        name, data = fetch.read(location)
        files.append(
            InputFile(
                location,
                data,
                Path(name).name,
                upstream_commit=fetch.commit_in(location),
                upstream_blob=fetch.git_blob(data),
            )
        )
    return files


def records(item: InputFile) -> list[Record]:
    return liger.records(item, ci=False)

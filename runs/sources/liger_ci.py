"""Liger-Kernel's CI benchmark runs (gh-pages branch, benchmarks/<commit>[-vX.Y.Z]/
benchmark.csv): each folder is one publication, the whole suite run at one commit."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from runs.sources import fetch, liger
from runs.sources.base import IngestError, InputFile, Record

SLUG = "liger-kernel-ci"
META = {
    "name": "Liger-Kernel CI benchmarks",
    "description": (
        "Liger-Kernel's continuous benchmark runs (gh-pages branch, benchmarks/<commit>/"
        "benchmark.csv): the whole suite run by upstream CI at one commit per folder."
    ),
    "license": liger.LICENSE,
    "homepage": "https://github.com/linkedin/Liger-Kernel/tree/gh-pages/benchmarks",
    "harness_repository": liger.REPOSITORY,
    "published_date": date(2026, 6, 10),
}


def _file(location: str, folder: str, data: bytes, sequence: int = 0) -> InputFile:
    commit, _, release = folder.partition("-v")
    return InputFile(
        location,
        data,
        folder,
        sequence,
        upstream_commit=commit,
        release=f"v{release}" if release else "",
        upstream_blob=fetch.git_blob(data),
    )


def inputs(locations: list[str]) -> list[InputFile]:
    """A root folder expands to its runs in the order upstream CI ran them (commits.txt);
    a run folder or a benchmark.csv path or URL is one run, named by its folder."""
    files: list[InputFile] = []
    for location in locations:
        path = Path(location)
        if path.is_dir() and not (path / "benchmark.csv").exists():
            files.extend(_root(path))
            continue
        if path.is_dir():
            location = str(path / "benchmark.csv")
        name, data = fetch.read(location)
        files.append(_file(location, Path(name).parent.name, data))
    return files


def _root(path: Path) -> list[InputFile]:
    folders = sorted(p.name for p in path.iterdir() if (p / "benchmark.csv").exists())
    order_file = path / "commits.txt"
    if order_file.exists():
        try:
            listed = [c.strip() for c in order_file.read_text("utf-8").split() if c.strip()]
        except UnicodeDecodeError as exc:
            raise IngestError(str(order_file), [(0, f"not UTF-8 text ({exc.reason})")]) from None
        # A listed run without its CSV is a broken copy, not a run to skip in silence.
        missing = [c for c in listed if c not in folders]
        if missing:
            raise IngestError(
                str(order_file),
                [(0, f"commits.txt names {len(missing)} run(s) without benchmark.csv: "
                     f"{', '.join(missing[:10])}")],
            )  # fmt: skip
        folders = listed + [f for f in folders if f not in listed]
    files = []
    for seq, folder in enumerate(folders, start=1):
        csv_path = path / folder / "benchmark.csv"
        files.append(_file(str(csv_path), folder, csv_path.read_bytes(), seq))
    return files


def records(item: InputFile) -> list[Record]:
    return liger.records(item, ci=True)

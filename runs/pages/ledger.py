"""The upstream ledger as a reader sees it: where each file lives upstream (never the path on
the machine that imported it), and repeated `unchanged` fetches of the same bytes folded into
one line with a count."""

from __future__ import annotations

import re
from dataclasses import dataclass

from runs.models import ImportRecord

# An absolute path on the importing machine inside a stored message (an ingest error names the
# file it read); the reader gets the file's upstream name instead.
LOCAL_PATH = re.compile(r"(?<![\w:/])/(?:[^/\s:'\"]+/)+[^/\s:'\"]*")


# Where each source's files live upstream; an import's location is a path on the machine that
# imported it, which means nothing to a reader (and says more about that machine than it should).
# (path components kept, upstream repository and folder; {commit} is the fetch's commit)
UPSTREAM_FILES = {
    "liger-kernel-bench": (
        1, "https://github.com/linkedin/Liger-Kernel", "blob/main/benchmark/data/{name}"
    ),
    "liger-kernel-ci": (
        2, "https://github.com/linkedin/Liger-Kernel", "blob/gh-pages/benchmarks/{name}"
    ),
    "kernelbench": (
        2, "https://github.com/ScalingIntelligence/KernelBench",
        "blob/{commit}/results/timing/{name}",
    ),
}  # fmt: skip


def upstream_file(source_slug: str, location: str, commit: str = "") -> tuple[str, str]:
    """(file name as upstream names it, link to it or "") for an import's location."""
    if location.startswith(("http://", "https://")):
        return location.rstrip("/").rsplit("/", 1)[-1], location
    parts = location.replace("\\", "/").rstrip("/").split("/")
    depth, repository, pattern = UPSTREAM_FILES.get(source_slug, (1, "", ""))
    name = "/".join(parts[-depth:])
    if not pattern:
        return name, ""
    return name, f"{repository}/{pattern.format(name=name, commit=commit or 'main')}"


@dataclass
class LedgerLine:
    entry: ImportRecord
    file_name: str
    file_url: str
    error: str
    count: int = 1  # fetches this line stands for
    oldest: object = None  # when the oldest of them was fetched


def public_text(text: str, location: str, name: str) -> str:
    """A stored message with the importing machine's paths replaced by upstream names."""
    if location:
        text = text.replace(location, name)
    return LOCAL_PATH.sub(lambda m: m.group(0).rstrip("/").rsplit("/", 1)[-1], text)


def ledger_lines(source_slug: str, entries) -> list[LedgerLine]:
    """Newest first, as given. Within a stretch of `unchanged` fetches (a sync that found
    nothing new, file after file), each file's repeats of the same bytes share one line; any
    other outcome ends the stretch."""
    lines: list[LedgerLine] = []
    stretch: dict[tuple[str, str], LedgerLine] = {}
    for entry in entries:
        unchanged = entry.outcome == ImportRecord.Outcome.UNCHANGED
        if not unchanged:
            stretch = {}
        elif (folded := stretch.get((entry.location, entry.sha256))) is not None:
            folded.count += 1
            folded.oldest = entry.imported_at
            continue
        name, url = upstream_file(source_slug, entry.location, entry.upstream_commit)
        line = LedgerLine(
            entry=entry,
            file_name=name,
            file_url=url,
            error=public_text(entry.error, entry.location, name),
            oldest=entry.imported_at,
        )
        lines.append(line)
        if unchanged:
            stretch[(entry.location, entry.sha256)] = line
    return lines

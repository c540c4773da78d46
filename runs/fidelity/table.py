"""The committed fidelity tables (data/fidelity/<source>.json), read once per process."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from django.urls import reverse

FIDELITY_DIR = Path(__file__).resolve().parent.parent.parent / "data" / "fidelity"

ESTABLISHED = "established"
NOT_ESTABLISHED = "not-established"
NOT_MEASURED = "not-measured"
STATUS_WORDS = {
    ESTABLISHED: "established",
    NOT_ESTABLISHED: "not established",
    NOT_MEASURED: "not measured",
}


def anchor(kernel: str, timed_pass: str, metric: str, provider: str) -> str:
    """A row's id on the page (bench/fidelity/compare.py writes the same one)."""
    raw = f"{kernel}-{timed_pass}-{metric}-{provider}".lower()
    return "".join(c if c.isalnum() or c in "_-" else "-" for c in raw)


@dataclass(frozen=True)
class Fidelity:
    """What the table says of one kernel, provider, pass and metric of a source."""

    status: str
    reason: str
    url: str
    gpu: str = ""
    date: str = ""

    def facts(self) -> dict:
        return {
            "status": self.status,
            "reason": self.reason,
            "url": self.url,
            "gpu": self.gpu,
            "date": self.date,
        }


@lru_cache(maxsize=16)
def table(source_slug: str) -> dict | None:
    """The source's table, or None where none is committed. Slugs are checked against the
    file names present, so a request's slug never names a path."""
    files = {p.stem: p for p in FIDELITY_DIR.glob("*.json")}
    if source_slug not in files:
        return None
    return json.loads(files[source_slug].read_text())


@lru_cache(maxsize=16)
def _rows_by_key(source_slug: str) -> dict[tuple, dict]:
    data = table(source_slug) or {"rows": []}
    return {(r["kernel"], r["provider"], r["pass"], r["metric"]): r for r in data["rows"]}


@dataclass(frozen=True)
class ScriptCell:
    """Upstream's own script's figure for one cell, in the runs' unit (ns or B)."""

    figure: float
    gpu: str
    commit: str
    calls: tuple[str, ...]


@lru_cache(maxsize=16)
def _script_cells(source_slug: str) -> dict[tuple, ScriptCell]:
    # Keyed by the commit's first seven characters, as the table names commits.
    cells = (table(source_slug) or {}).get("scriptCells", [])
    return {
        (c["commit"][:7], c["gpu"], c["kernel"], c["provider"], c["pass"], c["metric"],
         c["workload"]): ScriptCell(c["figure"], c["gpu"], c["commit"], tuple(c["calls"]))
        for c in cells
    }  # fmt: skip


def script_cell(
    *, source_slug: str, commit: str | None, gpu: str, kernel: str, provider: str,
    timed_pass: str, metric: str, workload: str,
) -> ScriptCell | None:  # fmt: skip
    """What upstream's own script measured for this very cell at the run's commit on the same
    GPU product (bench/h100/fidelity.py, script_cells), or None where it did not."""
    if not commit:
        return None
    key = (commit[:7], gpu, kernel, provider, timed_pass, metric, workload)
    return _script_cells(source_slug).get(key)


def page_url(source_slug: str, row_anchor: str = "") -> str:
    url = reverse("fidelity:source", args=[source_slug])
    return f"{url}#{row_anchor}" if row_anchor else url


@lru_cache(maxsize=16)
def script_changes(source_slug: str) -> dict:
    """{kernel: {"script", "why"}} of the kernels whose upstream script measures otherwise at
    one of the source's commits than at another (data/fidelity/script-changes/<source>.json)."""
    files = {p.stem: p for p in (FIDELITY_DIR / "script-changes").glob("*.json")}
    if source_slug not in files:
        return {}
    return json.loads(files[source_slug].read_text())["kernels"]


def measured_at(source_slug: str, row: dict) -> list[str]:
    """The upstream commits of the script a row was measured beside: its own list, else the
    table's commit (rows written before tables held two); none for a row not measured."""
    if row["status"] == NOT_MEASURED:
        return []
    commit = (table(source_slug) or {}).get("upstreamCommit", "")
    return row.get("upstreamCommits") or ([commit] if commit else [])


def _same_commit(a: str, b: str) -> bool:
    return a.startswith(b) or b.startswith(a)  # either hash may be the longer


def fidelity_of(
    *,
    source_slug: str,
    kernel: str,
    provider: str,
    timed_pass: str,
    metric: str,
    commit: str | None = None,
) -> Fidelity:
    """The table's row for the cell's kernel, provider, pass and metric; not measured where
    the source has no table or the table no row, or where the row was measured beside the
    script at other commits than the run's `commit` and the kernel's script measures
    otherwise at the run's (script_changes). For such a kernel, the row's status is the one it
    has at the run's commit."""
    row_anchor = anchor(kernel, timed_pass, metric, provider)
    row = _rows_by_key(source_slug).get((kernel, provider, timed_pass, metric))
    if row is None:
        return Fidelity(
            NOT_MEASURED,
            "the runner has not been run beside the source's own benchmark script for this "
            "kernel, provider, pass and metric",
            page_url(source_slug),
        )
    commits = measured_at(source_slug, row)
    changed = script_changes(source_slug).get(kernel)
    if commit and commits and changed and not any(_same_commit(commit, c) for c in commits):
        return Fidelity(
            NOT_MEASURED,
            f"the runner was compared with upstream's script at {', '.join(commits)} only, "
            f"and {changed['script']} measures otherwise at {commit[:7]}: {changed['why']}",
            page_url(source_slug, row_anchor),
            row.get("gpu", ""),
            row.get("date", ""),
        )
    status, reason = _at_commit(row, commit) if changed and commit else (None, None)
    return Fidelity(
        status or row["status"],
        reason or row["reason"],
        page_url(source_slug, row_anchor),
        row.get("gpu", ""),
        row.get("date", ""),
    )


def _at_commit(row: dict, commit: str) -> tuple[str | None, str | None]:
    """The status and reason the row has at `commit` alone (its byCommit entry): where the
    script measures otherwise at each commit, one commit's comparison says nothing of the
    other's, so the merged status (established only where every commit is) does not apply."""
    for measured, entry in (row.get("byCommit") or {}).items():
        if _same_commit(commit, measured):
            return entry["status"], entry["reason"]
    return None, None

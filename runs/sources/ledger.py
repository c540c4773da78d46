"""The upstream ledger: one append-only entry per fetch of an upstream file (a verified
controlled result counts as one of the source `kernelindex`), and the report of what that
file changed, which the pipeline fills in and the entry records."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from runs.models import ImportRecord, Source
from runs.sources.base import InputFile


@dataclass
class IngestReport:
    location: str
    publication: str
    rows: int
    created: int
    revised: int
    unchanged: int
    # [public id, revision] of every run this file revised, for the ledger.
    revised_ids: list[list] = field(default_factory=list, repr=False)

    def __str__(self) -> str:
        return (
            f"{self.location}: {self.rows} rows, {self.created} created, "
            f"{self.revised} revised, {self.unchanged} unchanged"
        )


def ledger_append(
    *, source: Source, publication, item: InputFile, report: IngestReport | None,
    trigger: str, error: str = "",
) -> ImportRecord:  # fmt: skip
    """Append one fetch to the ledger. A file that comes back from the same upstream commit
    with other bytes is a silent rewrite: upstream changed history without a new commit."""
    sha = hashlib.sha256(item.data).hexdigest() if item.data else ""
    rewrite_of = None
    if item.upstream_commit and sha and not error:
        rewrite_of = (
            ImportRecord.objects.filter(
                source=source,
                publication=publication,
                location=item.location[:500],
                upstream_commit=item.upstream_commit,
                outcome__in=ImportRecord.APPLIED,
            )
            .exclude(sha256=sha)
            .order_by("-imported_at", "-id")
            .first()
        )
    if error:
        outcome = ImportRecord.Outcome.FAILED
    elif report.created:
        outcome = ImportRecord.Outcome.CREATED
    elif report.revised:
        outcome = ImportRecord.Outcome.REVISED
    else:
        outcome = ImportRecord.Outcome.UNCHANGED
    return ImportRecord.objects.create(
        source=source,
        publication=publication,
        location=item.location[:500],
        upstream_commit=item.upstream_commit,
        upstream_blob=item.upstream_blob,
        sha256=sha,
        rows=report.rows if report else 0,
        created=report.created if report else 0,
        revised=report.revised if report else 0,
        unchanged=report.unchanged if report else 0,
        revised_ids=report.revised_ids[:5000] if report else [],
        outcome=outcome,
        rewrite_of=rewrite_of,
        trigger=trigger,
        error=error[:2000],
    )

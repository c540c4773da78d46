"""Citations of a run: BibTeX and CSL-JSON, both naming the permalink, the digest and the
access date (a page can change; the digest pins what was cited)."""

from __future__ import annotations

from datetime import date

from django.conf import settings

from kilib.origin import absolute


def permalink(run) -> str:
    return absolute(run.get_absolute_url())


def _bibtex_escape(text: str) -> str:
    for char in "\\{}&%$#_":
        text = text.replace(char, "\\" + char)
    return text


def bibtex(run, accessed: date) -> str:
    observed = run.observed_at.date()
    title = f"Run {run.public_id}: {run.title}"
    return (
        f"@misc{{kernelindex-{run.public_id},\n"
        f"  title = {{{{{_bibtex_escape(title)}}}}},\n"
        f"  author = {{{{{_bibtex_escape(run.source.name)}}}}},\n"
        f"  year = {{{observed.year}}},\n"
        f"  month = {{{observed.month}}},\n"
        f"  howpublished = {{KernelIndex, \\url{{{permalink(run)}}}}},\n"
        f"  url = {{{permalink(run)}}},\n"
        f"  urldate = {{{accessed.isoformat()}}},\n"
        f"  note = {{Digest {run.digest}; accessed {accessed.isoformat()}}}\n"
        f"}}\n"
    )


def _parts(d: date) -> dict:
    return {"date-parts": [[d.year, d.month, d.day]]}


def csl_json(run, accessed: date) -> list[dict]:
    return [
        {
            "id": f"kernelindex-{run.public_id}",
            "type": "dataset",
            "title": f"Run {run.public_id}: {run.title}",
            "author": [{"literal": run.source.name}],
            "publisher": settings.SITE_NAME,
            "issued": _parts(run.observed_at.date()),
            "accessed": _parts(accessed),
            "URL": permalink(run),
            "note": f"Digest {run.digest}",
            "version": str(run.revision),
        }
    ]

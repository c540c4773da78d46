"""manage.py export: the whole bulk export as one file, with no time budget.

The same rows, columns and trailer as /api/v1/runs/export.csv (runs.read.exports); for sets
too large to stream within the web server's worker timeout in one part, and for setups with
no web server at all.
"""

from __future__ import annotations

import os
import sys

from django.core.management.base import BaseCommand, CommandError
from django.http import QueryDict

from runs.read import exports


class Command(BaseCommand):
    help = (
        "Write every current run (or a filtered set: benchmark=llama4_rope gpu=... as on /runs/) "
        "as CSV or JSON lines, ending with a trailer that holds the row count and SHA-256."
    )

    def add_arguments(self, parser):
        parser.add_argument("filters", nargs="*", metavar="NAME=VALUE", help="the /runs/ filters")
        parser.add_argument("--format", choices=exports.FORMATS, default="csv")
        parser.add_argument("--out", help="file to write (default: standard output)")

    def handle(self, *args, filters: list[str], format: str, out: str | None, **options):
        params = QueryDict(mutable=True)
        for item in filters:
            name, sep, value = item.partition("=")
            if not sep or not name:
                raise CommandError(f"a filter is NAME=VALUE, e.g. benchmark=llama4_rope: {item!r}")
            params.appendlist(name, value)
        queryset, after, errors = exports.filtered(params)
        if errors:
            raise CommandError("; ".join(f"{k}: {v}" for k, v in errors.items()))
        parts = exports.stream(format, exports.rows(queryset, after=after))
        if out is None:
            for data in parts:
                sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
            return
        # Written beside the target and renamed when whole: a reader of `out` never sees half a
        # file, and an interrupted export leaves the previous one in place.
        partial = f"{out}.partial"
        try:
            with open(partial, "wb") as handle:
                for data in parts:
                    handle.write(data)
                last = data
            os.replace(partial, out)
        except OSError as exc:
            raise CommandError(f"cannot write {out}: {exc}") from None
        self.stderr.write(f"{out}: {last.decode().splitlines()[-1]}")

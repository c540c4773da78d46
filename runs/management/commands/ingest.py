from __future__ import annotations

import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from kilib.origin import command_origin, links_origin
from runs.sources import SOURCES
from runs.sources.base import IngestError
from runs.sources.pipeline import ingest


class Command(BaseCommand):
    help = (
        "Import upstream benchmark results. Idempotent; each file is imported whole or not at all."
    )

    def add_arguments(self, parser):
        parser.add_argument("source", choices=sorted(SOURCES))
        parser.add_argument("paths", nargs="+", help="files, folders or http(s) URLs")
        parser.add_argument("--no-progress", action="store_true")
        parser.add_argument(
            "--site-root",
            default="",
            help="origin of the links in the watch emails this import sends, e.g. "
            "https://kernelindex.example.org (default: SITE_ROOT)",
        )

    def handle(self, *args, source: str, paths: list[str], no_progress: bool, **options):
        show = not no_progress and sys.stderr.isatty()
        try:
            origin, why = command_origin(options.get("site_root") or "")
        except ValueError as exc:
            raise CommandError(f"--site-root: {exc}") from None
        if not settings.SITE_ROOT_CONFIGURED or options.get("site_root"):
            # No request to follow: say which origin the emails link to, never a silent guess.
            self.stderr.write(f"Links in watch emails: {origin} ({why}).")
        with links_origin(origin):
            self._ingest(source, paths, show)

    def _ingest(self, source: str, paths: list[str], show: bool) -> None:
        def progress(rows):
            return tqdm(rows, unit="row", leave=False, disable=not show)

        try:
            reports = ingest(source_slug=source, locations=paths, progress=progress)
        except IngestError as exc:
            raise CommandError(f"nothing imported from {exc}") from None
        except OSError as exc:
            raise CommandError(f"cannot read input: {exc}") from None
        total = {"rows": 0, "created": 0, "revised": 0, "unchanged": 0}
        for report in reports:
            self.stdout.write(str(report))
            for key in total:
                total[key] += getattr(report, key)
        summary = (
            f"{source}: {len(reports)} file(s), {total['rows']} rows: {total['created']} created, "
            f"{total['revised']} revised, {total['unchanged']} unchanged"
        )
        if not total["created"] and not total["revised"]:
            summary += " (nothing changed)"
        self.stdout.write(self.style.SUCCESS(summary))

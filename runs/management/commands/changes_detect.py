from __future__ import annotations

from collections import Counter

from django.core.management.base import BaseCommand, CommandError

from runs.changes.models import CellChange, CellSeries
from runs.changes.services import changes_detect
from runs.models import Source


class Command(BaseCommand):
    help = (
        "Judge every cell of a source's history with the change rule (docs/changes.md). "
        "Ingest and sync do this for the cells they touch; this recomputes all. Idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("sources", nargs="*", help="source slugs (default: every source)")

    def handle(self, *args, sources: list[str], **options):
        found = Source.objects.filter(slug__in=sources) if sources else Source.objects.all()
        missing = set(sources) - {s.slug for s in found}
        if missing:
            raise CommandError(f"no such source: {', '.join(sorted(missing))}")
        for source in found:
            report = changes_detect(source=source)
            status = Counter(
                CellSeries.objects.filter(source=source).values_list("status", flat=True)
            )
            kinds = Counter(
                CellChange.objects.filter(source=source).values_list("kind", "direction")
            )
            self.stdout.write(
                f"{source.slug}: {report.cells} cells stored ({status['judged']} judged, "
                f"{status['noisy']} too noisy); steps: {kinds['step', 'regression']} "
                f"regressions, {kinds['step', 'improvement']} improvements; "
                f"{kinds['transient', 'regression'] + kinds['transient', 'improvement']} "
                "transients, "
                f"{kinds['outlier', 'regression'] + kinds['outlier', 'improvement']} outliers, "
                f"{kinds['pending', 'regression'] + kinds['pending', 'improvement']} pending"
            )

"""manage.py claims judge: re-judge every claim from the recorded evidence events."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from runs.claims.services import claims_judge


class Command(BaseCommand):
    help = "Judge every published claim whose two sides one runner process re-measured."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("judge", help="recompute every judged claim")

    def handle(self, *args, action: str, **options):
        counts = claims_judge()
        shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing to judge"
        self.stdout.write(f"claims: {shown}")

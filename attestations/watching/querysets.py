"""Reads of the watches (attestations/watching/models.py): what a run page shows as watched."""

from __future__ import annotations

from django.db import models


class WatchQuerySet(models.QuerySet):
    def of_user(self, user) -> WatchQuerySet:
        return self.filter(user=user)

    def run_page_targets(self):
        """(target, benchmark id, source id, cell key, provider key) of the watches a run
        page can show as watched: of a cell, a benchmark or a source."""
        return self.filter(target__in=["cell", "benchmark", "source"]).values_list(
            "target", "benchmark_id", "source_id", "cell_key", "provider_key"
        )

from __future__ import annotations

from django.db import models


class RunQuerySet(models.QuerySet):
    def public(self) -> RunQuerySet:
        """Current revisions only: what the site shows and ranks."""
        return self.filter(is_current=True)

    def for_group(self, key: str) -> RunQuerySet:
        return self.filter(group__key=key)

    def ranked(self) -> RunQuerySet:
        return self.order_by("rank", "median", "public_id")

    def with_related(self) -> RunQuerySet:
        return self.select_related(
            "source",
            "publication",
            "benchmark",
            "implementation__project",
            "workload",
            "protocol",
            "environment__gpu",
            "group",
        )

    def history_of(self, run) -> RunQuerySet:
        """The same cell across publications (CI runs), oldest first.

        Same provider, not same implementation row: a Liger row of a CI run names the commit it
        ran, so each CI run is another revision of Liger, and following it across commits is
        what the history is for.
        """
        return (
            self.public()
            .filter(
                group__cell_key=run.group.cell_key,
                implementation__provider_key=run.implementation.provider_key,
            )
            .select_related("publication")
            .order_by("observed_at", "publication__sequence")
        )


class ComparisonGroupQuerySet(models.QuerySet):
    def with_related(self) -> ComparisonGroupQuerySet:
        return self.select_related(
            "publication__source", "benchmark", "workload", "environment__gpu"
        )

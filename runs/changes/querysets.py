"""Reads of the detected changes, for the run page, the source's changes page, the benchmark
page, the API and the feeds: each a filter on an index of CellChange.Meta."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Abs

from runs.querysets import sql_columns, sql_instances, sql_marks, sql_rows, sql_table


class CellChangeQuerySet(models.QuerySet):
    def at_points(
        self, *, source_ids, cell_key: str, provider_key: str, publication_ids
    ) -> tuple[list, str | None]:
        """One cell's changes in these sources at these publications (the unique index), in
        the order they were found, each with `previous_slug`, the publication before it as a
        run page names it, and `together`, (cells, kernels) of the group a grouped change
        moved with ("37 cells of 9 kernels moved together"; None for one that moved alone);
        and the status of the cell's oldest series among these sources (None if none has
        one): the changes among the points a run page shows, and what the rule made of the
        cell. One query written as SQL: Django took longer to compile the filter than the
        database took to run it, and every reader arriving at a run nobody asked for since the
        last data change pays it; the status is the one row the changes are joined to, so a
        cell without changes still gives it, and a group's sizes are counted on the
        publication's index (cellchange_pub_kind), all in the same round trip."""
        series = self.model._meta.apps.get_model("runs", "CellSeries")
        changes = sql_table(self.model)
        publications = sql_table(self.model._meta.get_field("previous").related_model)
        sources, points = list(source_ids), list(publication_ids)
        marks = sql_marks(sources)
        group = (
            f"FROM {changes} g WHERE g.publication_id = c.publication_id AND g.kind = c.kind "
            "AND g.direction = c.direction AND g.grouped"
        )
        rows = sql_rows(
            f"SELECT s.status, {sql_columns(self.model, 'c')}, p.slug, "
            f"CASE WHEN c.grouped THEN (SELECT COUNT(*) {group}) END, "
            f"CASE WHEN c.grouped THEN (SELECT COUNT(DISTINCT g.benchmark_id) {group}) END "
            f"FROM (SELECT (SELECT status FROM {sql_table(series)} WHERE source_id IN ({marks}) "
            "AND cell_key = %s AND provider_key = %s ORDER BY id LIMIT 1) AS status) s "
            f"LEFT JOIN ({changes} c INNER JOIN {publications} p ON c.previous_id = p.id) "
            f"ON c.source_id IN ({marks}) AND c.cell_key = %s AND c.provider_key = %s "
            f"AND c.publication_id IN ({sql_marks(points)}) ORDER BY c.id",
            [*sources, cell_key, provider_key, *sources, cell_key, provider_key, *points],
        )
        found = []
        for row in rows:
            if row[1] is None:  # no change: the status row alone
                continue
            (change,) = sql_instances([(self.model, "c")], row[1:-3])
            change.previous_slug, cells, kernels = row[-3:]
            change.together = (cells, kernels) if change.grouped else None
            found.append(change)
        return found, rows[0][0]

    def of_source(self, source) -> CellChangeQuerySet:
        return self.filter(source=source)

    def of_benchmark(self, benchmark) -> CellChangeQuerySet:
        return self.filter(benchmark=benchmark)

    def narrowed_to(self, *, source=None, gpu=None, timed_pass=None, metric=None):
        """Those of a source, GPU, pass and metric (slugs and values; each None: any)."""
        named = {"source__slug": source, "run__environment__gpu__slug": gpu,
                 "run__timed_pass": timed_pass, "run__metric": metric}  # fmt: skip
        return self.filter(**{k: v for k, v in named.items() if v})

    def of_run_cell(self, run) -> CellChangeQuerySet:
        """The changes of the run's cell and provider, in every source (a cell feed's)."""
        return self.filter(
            cell_key=run.group.cell_key, provider_key=run.implementation.provider_key
        )

    def reported(self) -> CellChangeQuerySet:
        """Steps only: what pages list as regressions and improvements and notices send."""
        return self.filter(kind="step")

    def alarmed(self) -> CellChangeQuerySet:
        """Steps a maintainer has not dismissed: what feeds carry and notices send. A dismissed
        change stays on the pages, said to be dismissed."""
        return self.reported().exclude(review="dismissed")

    def newest_first(self) -> CellChangeQuerySet:
        """Newest publication first by upstream's time, as the feeds and the API list them
        (each feed's filter has an index ending in published_at and id, so its newest entries
        are read first and alone). Never by detection: a re-detection replaces the rows."""
        return self.order_by("-published_at", "-id")

    def newest_regressions_first(self) -> CellChangeQuerySet:
        """Newest publication first by upstream's time (newest_first), and within one
        publication ungrouped regressions first (regressions_first): a benchmark's list."""
        return self.regressions_first().order_by("-published_at", "_order", "-_size", "id")

    def regressions_first(self) -> CellChangeQuerySet:
        """Ungrouped regressions, then ungrouped improvements, then the grouped, each by the
        size of the move."""
        return self.annotate(
            _order=models.Case(
                models.When(Q(grouped=False, direction="regression"), then=0),
                models.When(Q(grouped=False), then=1),
                models.When(Q(direction="regression"), then=2),
                default=3,
            ),
            _size=Abs((F("after") - F("before")) / F("before")),
        ).order_by("_order", "-_size", "id")

    def with_related(self) -> CellChangeQuerySet:
        return self.select_related(
            "publication", "previous", "until", "benchmark", "source",
            "run__implementation", "run__workload", "run__environment__gpu",
        )  # fmt: skip

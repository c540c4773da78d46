from __future__ import annotations

import functools
import re
from datetime import UTC, datetime
from typing import NamedTuple

from django.db import connection, models
from django.db.models import Count, Min, Q, Sum
from django.db.models.functions import Coalesce
from django.http import Http404

PUBLIC_ID = re.compile(r"^[0-9a-f]{8}$")
GROUP_KEY_PREFIX = re.compile(r"^[0-9a-f]{16,64}$")
# A point of a cell's history as the run page reads it (RunQuerySet.history_window): the
# columns of the run_history index and the publication's slug and sequence; the page names the
# source from the run's own catalogue rows (one source for most cells), not from a join.
HISTORY_FIELDS = ("pk", "public_id", "median", "observed_at", "publication__slug",
                  "publication_id", "publication__sequence", "source_id")  # fmt: skip


class RunPage(NamedTuple):
    """A run as its page reads it (RunQuerySet.run_page_or_404)."""

    run: models.Model
    leader: str | None  # rank 1 of its group; None for the leader itself or an unranked run
    has_claims: bool  # whether the run is a side of a judged claim (few are)


class HistoryWindow(NamedTuple):
    """The cell's points around a run and its points per source (RunQuerySet.history_window)."""

    before: list[dict]  # nearest first
    after: list[dict]  # nearest first
    per_source: dict[int, int]  # {source id: points} of the whole cell


def public_id_or_404(public_id: str) -> str:
    """A run id as a URL gives it, or a 404 that says what one looks like (before any query
    or cache lookup is made of it)."""
    if not PUBLIC_ID.match(public_id):
        raise Http404("A run id is 8 hexadecimal characters, like 01a0202b.")
    return public_id


class RunQuerySet(models.QuerySet):
    def public(self) -> RunQuerySet:
        """Current revisions only: what the site shows and ranks."""
        return self.filter(is_current=True)

    def current_of(self, *, source_slug: str, external_id: str):
        """The current revision of a source's run, by its identity in that source."""
        return self.select_related("source").get(
            source__slug=source_slug, external_id=external_id, is_current=True
        )

    def current_or_404(self, public_id: str):
        """The current revision of the run with this public id, for every page and form that
        names a run in its URL; a malformed id and an unknown one get 404s that say which."""
        public_id_or_404(public_id)
        try:
            return self.public().get(public_id=public_id)
        except self.model.DoesNotExist:
            raise Http404(f"No run has the id {public_id}.") from None

    def for_group(self, key: str) -> RunQuerySet:
        return self.filter(group__key=key)

    def ranked(self) -> RunQuerySet:
        return self.order_by("rank", "median", "public_id")

    def verdicts_by_gpu(self, benchmark) -> list[dict]:
        """Per GPU product and publication that has a run of the benchmark with a rerun's
        verdict: how many current runs it has and how many carry each verdict, newest publication
        first. Two grouped queries: the verdicts through the evidence index (few runs carry
        one beside the reported millions), then the runs of just those publications."""
        verdicts = ("checked", "reproduced", "not-reproduced", "incorrect")
        cells: dict[tuple, dict] = {}
        runs = self.public().filter(benchmark=benchmark)
        judged = (
            runs.filter(evidence__in=verdicts)
            .values(
                "environment__gpu__upstream_name",
                "publication_id",
                "publication__slug",
                "publication__published_at",
                "source__slug",
                "evidence",
            )
            .annotate(n=Count("id"))
            .order_by()
        )
        for row in judged:
            key = (row["environment__gpu__upstream_name"], row["publication_id"])
            cell = cells.setdefault(key, {
                "gpu": key[0], "publication": row["publication__slug"],
                "published_at": row["publication__published_at"],
                "source": row["source__slug"], "runs": 0, "counts": {}})  # fmt: skip
            cell["counts"][row["evidence"].replace("-", "_")] = row["n"]  # a template's name
        totals = (
            runs.filter(publication_id__in={pub for _, pub in cells})
            .values_list("environment__gpu__upstream_name", "publication_id")
            .annotate(n=Count("id"))
            .order_by()
        )
        for gpu, pub, n in totals:
            if (gpu, pub) in cells:
                cells[(gpu, pub)]["runs"] = n
        for cell in cells.values():
            cell["unjudged"] = cell["runs"] - sum(cell["counts"].values())
        by_gpu = sorted(cells.values(), key=lambda c: c["gpu"])
        oldest = datetime.min.replace(tzinfo=UTC)
        return sorted(by_gpu, key=lambda c: c["published_at"] or oldest, reverse=True)

    def newest(self) -> RunQuerySet:
        """Newest imports first. Ids are handed out in insert order, so the primary key's index
        serves this with no index of its own and a LIMIT stops after a few rows at any size."""
        return self.order_by("-id")

    def count_of_source(self, source) -> dict[str, int]:
        """The source's current, total and revised runs (every revision: a source page counts
        what it revised), from its own runs only."""
        return self.filter(source=source).aggregate(
            current=Count("id", filter=Q(is_current=True)),
            total=Count("id"),
            revised=Count("id", filter=Q(revision__gt=1)),
        )

    def with_ids(self, ids) -> RunQuerySet:
        """These runs, by primary key (rows a listing kept no part of)."""
        return self.filter(pk__in=ids)

    def in_groups(self, groups) -> RunQuerySet:
        """Runs of these comparison groups (ids, or one group in a list)."""
        return self.filter(group__in=groups)

    def by_cell(self) -> RunQuerySet:
        """A benchmark page's order: pass, metric, the swept value, then rank."""
        return self.order_by("timed_pass", "metric", "sweep_value", "rank")

    def revisions_of(self, source) -> RunQuerySet:
        """The source's revised runs (revision 2 and later), newest first, as a source page
        lists them."""
        return (
            self.filter(source=source, revision__gt=1)
            .select_related("benchmark", "implementation")
            .order_by("-created_at")
        )

    def for_feed(self) -> RunQuerySet:
        """Newest imports first (the partial index on created_at, id); what an entry names
        (benchmark, implementation, GPU, source) comes from runs.read.catalogue.attach."""
        return self.order_by("-created_at", "-id")

    def with_workload(self) -> RunQuerySet:
        """With the workload, whose parameters name a run wherever it is listed."""
        return self.select_related("workload")

    def with_cell(self) -> RunQuerySet:
        """With what names the run's cell: its group (the cell key) and implementation (the
        provider key)."""
        return self.select_related("group", "implementation")

    def run_page_or_404(self, public_id: str) -> RunPage:
        """current_or_404() of for_run_page(), with the leader of the run's group: the current
        run of this id with its workload and comparison group, in one query written as SQL (by
        the unique index of current ids, and the two primary keys). Django compiled that select
        of 57 columns in more time (0.4 ms) than the database took to run it, and a reader
        arriving at a run nobody asked for since the last data change pays it first; the rows
        become instances as the ORM makes them (sql_instances). The leader comes in the same
        round trip, which on a small host cost a page more than the database's work on it."""
        public_id_or_404(public_id)
        sql, parts, joined = _run_page_sql(self.model, connection.vendor)
        rows = sql_rows(sql, [public_id])
        if not rows:
            raise Http404(f"No run has the id {public_id}.")
        *columns, leader, has_claims = rows[0]
        run, *related = sql_instances(parts, columns)
        for field, instance in zip(joined, related, strict=True):
            field.set_cached_value(run, instance)
        if leader is None or leader == run.public_id:
            return RunPage(run, None, bool(has_claims))
        return RunPage(run, leader, bool(has_claims))

    def for_run_page(self) -> RunQuerySet:
        """What a run's own pages read beside it: the workload and the comparison group. The
        catalogue rows come from runs.read.catalogue.attach: joining eight more tables cost
        PostgreSQL more time planning the query (9 ms at 80k runs) than running it."""
        return self.select_related("workload", "group")

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

    def ranking_rows(self) -> list[dict]:
        """The runs as a group page's table and chart show them: plain rows with their
        implementation's and project's names (one query, no run instances, no catalogue)."""
        return list(
            self.values(
                "public_id",
                "rank",
                "median",
                "p20",
                "p80",
                "unit",
                implementation_name=models.F("implementation__display_name"),
                project_name=models.F("implementation__project__name"),
            )
        )

    def for_listing(self) -> RunQuerySet:
        """Runs as tables and charts show them: with the workload (for its parameters), without
        the JSON that only a run's own page reads. Decoding each row's spec, labels and
        metrics cost a benchmark page most of its time."""
        return self.select_related("workload").defer(
            "spec", "labels", "source_metrics", "workload__spec", "workload__tensors"
        )

    def history_of(self, run) -> RunQuerySet:
        """The same cell across publications (CI runs), oldest first.

        Same provider, not same implementation row: a Liger row of a CI run names the commit it
        ran, so each CI run is another revision of Liger, and following it across commits is
        what the history is for. Both are in the run's history key (models.history_key), so
        this is one range of the run_history index, not a probe per comparison group.
        """
        return (
            self.public()
            .filter(history_key=run.history_key)
            .select_related("publication")
            .order_by("observed_at", "publication__sequence")
        )

    def history_points(self, run):
        """history_of(run) as the history page lists it: one small row per point."""
        return self.history_of(run).values(
            "pk", "public_id", "median", "observed_at", "publication__slug"
        )

    def history_window(self, run, size: int) -> HistoryWindow:
        """Up to `size` points of the run's cell on each side of it, nearest first, as rows of
        HISTORY_FIELDS, and {source id: points} of the whole cell, in one query: two ranges of
        the run_history index from the run outwards, each stopped after `size` rows, and a
        count over the cell's range of it. Written as SQL: Django took longer to compile the
        UNION of two querysets (3 ms) than the database took to run it, and a reader arriving
        at a run nobody asked for since the last data change pays it. The counts come as rows
        of their own (no pk), in the same round trip: at a million runs most cells are longer
        than the window, and a second query cost the page more than the count itself."""
        ops = connection.ops
        runs = sql_table(self.model)
        publications = sql_table(self.model._meta.get_field("publication").related_model)
        select = (
            "SELECT r.id, r.public_id, r.median, r.observed_at, p.slug, r.publication_id, "
            f"p.sequence, r.source_id FROM {runs} r INNER JOIN {publications} p "
            # r.is_current: the public rows (RunQuerySet.public).
            "ON r.publication_id = p.id WHERE r.is_current AND r.history_key = %s AND "
        )
        earlier = "(r.observed_at < %s OR (r.observed_at = %s AND p.sequence < %s))"
        # The bound on the time beside `earlier` is what it implies, spelled out as a range of
        # the run_history index: each side reads its window from the run outwards, no further.
        sql = (
            f"SELECT * FROM ({select}r.observed_at <= %s AND {earlier} "
            "ORDER BY r.observed_at DESC, p.sequence DESC LIMIT %s) AS before_run UNION ALL "
            f"SELECT * FROM ({select}r.observed_at >= %s AND NOT {earlier} "
            "ORDER BY r.observed_at, p.sequence LIMIT %s) AS after_run UNION ALL "
            "SELECT NULL, NULL, NULL, NULL, NULL, NULL, COUNT(*), source_id "
            f"FROM {runs} WHERE is_current AND history_key = %s GROUP BY source_id"
        )
        at, sequence = run.observed_at, run.publication.sequence
        when = ops.adapt_datetimefield_value(at)
        side = [run.history_key, when, when, when, sequence, size]
        found = sql_rows(sql, side + side + [run.history_key])
        counts = {row[7]: row[6] for row in found if row[0] is None}
        found = [row for row in found if row[0] is not None]
        if connection.vendor != "postgresql":  # SQLite gives the time as text
            found = [
                (*row[:3], ops.convert_datetimefield_value(row[3], None, connection), *row[4:])
                for row in found
            ]
        rows = sorted(
            (dict(zip(HISTORY_FIELDS, row, strict=True)) for row in found),
            key=lambda p: (p["observed_at"], p["publication__sequence"]),
        )
        split = sum(
            1 for p in rows if (p["observed_at"], p["publication__sequence"]) < (at, sequence)
        )
        return HistoryWindow(rows[:split][::-1], rows[split:], counts)


class GpuQuerySet(models.QuerySet):
    def measured(self) -> GpuQuerySet:
        """The GPUs some environment names (the catalogue lists more than were measured)."""
        return self.filter(environments__isnull=False).distinct()


class ComparisonGroupQuerySet(models.QuerySet):
    def by_key_prefix_or_404(self, prefix: str):
        """The group whose key starts with these hex digits (16 to 64 of them).

        A range on the unique index, then the exact prefix test: LIKE 'x%' cannot use a b-tree
        index under a non-C collation, a range can."""
        if not GROUP_KEY_PREFIX.match(prefix):
            raise Http404("A comparison group is named by the first 16 hex digits of its key.")
        lower = f"sha256:{prefix}"
        upper = lower[:-1] + chr(ord(lower[-1]) + 1)
        try:
            return self.get(key__gte=lower, key__lt=upper, key__startswith=lower)
        except self.model.DoesNotExist:
            raise Http404(f"No comparison group has a key starting {prefix}.") from None
        except self.model.MultipleObjectsReturned:
            raise Http404(f"More than one comparison group has a key starting {prefix}.") from None

    def with_related(self) -> ComparisonGroupQuerySet:
        return self.select_related(
            "publication__source", "benchmark", "workload", "environment__gpu"
        )

    def newest_per_view(self, *, benchmark) -> list[int]:
        """The ids of the groups a benchmark page plots: for each source, GPU, timed pass and
        metric, those of the newest publication that has it. A CI run measures on one GPU, so
        the newest run of a source alone would hide every other GPU the source ever measured.
        One query over the benchmark's groups (a few thousand at most)."""
        rows = self.filter(benchmark=benchmark).values_list(
            "id",
            "publication__source_id",
            "environment__gpu_id",
            "timed_pass",
            "metric",
            "publication__sequence",
            "publication_id",
        )
        newest: dict[tuple, tuple[int, int]] = {}
        found = []
        for group_id, source, gpu, timed_pass, metric, sequence, publication in rows:
            view = (source, gpu, timed_pass, metric)
            newest[view] = max(newest.get(view, (-1, -1)), (sequence, publication))
            found.append((group_id, view, (sequence, publication)))
        return [group_id for group_id, view, pub in found if newest[view] == pub]


class TallyQuerySet(models.QuerySet):
    def per_benchmark_on(self, gpu) -> dict[int, int]:
        """{benchmark id: current runs} on this GPU (a GPU page's list), from the tallies of
        the GPU's environments: a few rows, not its runs."""
        rows = (
            self.filter(environment_id__in=gpu.environments.values("id"), runs__gt=0)
            .order_by()
            .values_list("benchmark_id")
            .annotate(n=Sum("runs"))
        )
        return {benchmark: int(n) for benchmark, n in rows}

    def home_counts(self) -> dict:
        """Current runs per benchmark, GPU and source, the total, the comparison groups and the
        earliest observation: the tallies (a few hundred rows the write side keeps, models.Tally),
        the environments' GPUs, and the oldest current run from the observed-time index. The
        same three small queries at any number of runs."""
        gpu_of = dict(
            self.model._meta.apps.get_model("runs", "Environment").objects.values_list("id", "gpu")
        )
        counts: dict = {"benchmark": {}, "gpu": {}, "source": {}, "total": 0, "groups": 0}
        per_source: dict[tuple[int, int], int] = {}
        rows = self.values_list("benchmark_id", "environment_id", "source_id", "runs", "groups")
        for benchmark, environment, source, n, groups in rows:
            counts["groups"] += groups
            if not n:
                continue
            keys = (("benchmark", benchmark), ("gpu", gpu_of.get(environment)), ("source", source))
            for name, key in keys:
                counts[name][key] = counts[name].get(key, 0) + n
            per_source[benchmark, source] = per_source.get((benchmark, source), 0) + n
            counts["total"] += n
        # Each benchmark's main source (the one with most of its runs), for grouping lists.
        main: dict[int, tuple[int, int]] = {}
        for (benchmark, source), n in per_source.items():
            main[benchmark] = max(main.get(benchmark, (0, 0)), (n, source))
        counts["benchmark_source"] = {b: source for b, (_, source) in main.items()}
        runs = self.model._meta.apps.get_model("runs", "Run").objects.public()
        counts["first"] = runs.aggregate(first=Min("observed_at"))["first"]
        return counts


class PublicationQuerySet(models.QuerySet):
    def of_source(self, source) -> PublicationQuerySet:
        return self.filter(source=source)

    def latest_per_source(self, *, benchmark) -> list:
        """The newest publication of each source that has runs of this benchmark, in source
        order: the benchmark CSV, and the newest CI run (older CI runs are each cell's history,
        shown on the run pages). One query; a source has a few hundred publications at most."""
        latest = {}
        rows = (
            self.filter(groups__benchmark=benchmark)
            .select_related("source")
            .distinct()
            .order_by("source__slug", "-sequence", "-id")
        )
        for pub in rows:
            latest.setdefault(pub.source_id, pub)
        return list(latest.values())


class BenchmarkQuerySet(models.QuerySet):
    def with_run_counts(self) -> BenchmarkQuerySet:
        """Each benchmark with `n`, its current runs, summed from its tallies (models.Tally,
        on the tallies' unique index): a few rows per benchmark, where counting its runs read
        every one of them (seconds a page at a million runs)."""
        tallies = (
            self.model._meta.apps.get_model("runs", "Tally")
            .objects.filter(benchmark_id=models.OuterRef("pk"))
            .order_by()
            .values("benchmark_id")
            .annotate(n=Sum("runs"))
            .values("n")
        )
        return self.annotate(n=Coalesce(models.Subquery(tallies), 0))

    def by_title(self, ids) -> BenchmarkQuerySet:
        return self.filter(pk__in=ids).order_by("title")

    def titles_of(self, ids) -> list[tuple[int, str, str]]:
        """(id, slug, title) of these benchmarks, by title: a GPU page lists a few hundred, and
        a link needs only these two fields, not a model instance each."""
        return list(self.by_title(ids).values_list("id", "slug", "title"))


class AppendOnlyQuerySet(models.QuerySet):
    """An append-only table at the QuerySet level: bulk updates and deletes, which bypass
    save() and delete(), are refused (models.AppendOnly refuses them row by row)."""

    def _refuse(self):
        raise ValueError(f"{self.model.__name__} is append-only")

    def update(self, **kwargs):
        self._refuse()

    def bulk_update(self, *args, **kwargs):
        self._refuse()

    def delete(self):
        self._refuse()


class LedgerQuerySet(AppendOnlyQuerySet):
    def of_source(self, source) -> LedgerQuerySet:
        """The source's entries, newest first (the model's order), with what each names."""
        return self.filter(source=source).select_related("publication", "rewrite_of")

    def page_of(self, source, before: int | None, size: int) -> list:
        """Up to size + 1 of the source's entries, newest first, older than entry `before`
        (its id) where given: a keyset page on (source, -imported_at), the same few rows read
        however long the ledger is (the extra row says whether there is an older page)."""
        entries = self.of_source(source).order_by("-imported_at", "-id")
        if before is not None:
            at = self.filter(source=source, pk=before).values_list("imported_at", flat=True)
            entries = entries.filter(
                models.Q(imported_at__lt=models.Subquery(at))
                | models.Q(imported_at=models.Subquery(at), id__lt=before)
            )
        return list(entries[: size + 1])

    def newest_of(self, source, size: int) -> list[dict]:
        """The source's newest `size` entries as a source page's table shows them: plain rows
        (no entry, publication or rewritten entry instances)."""
        rows = self.filter(source=source).values(
            "imported_at",
            "location",
            "upstream_commit",
            "sha256",
            "rows",
            "created",
            "revised",
            "unchanged",
            publication_slug=models.F("publication__slug"),
        )
        return list(rows[:size])

    def last_per_source(self) -> dict[int, object]:
        """{source id: time of its newest entry}: the home page's "last import"."""
        rows = self.order_by().values_list("source").annotate(last=models.Max("imported_at"))
        return dict(rows)


class EvidenceEventQuerySet(AppendOnlyQuerySet):
    def latest_for(self, run) -> models.Model | None:
        """The event behind the run's current level (the newest), or None."""
        return (
            self.filter(run=run)
            .select_related("controlled_run")
            .order_by("-created_at", "-id")
            .first()
        )

    def basis_of(self, run, latest) -> models.Model | None:
        """Where the newest event found something that did not move the level (a later
        process that could only check a settled verdict), the newest event that found what
        the level is: the rerun the level rests on. None when the newest event is that one."""
        if latest is None or latest.outcome == run.evidence:
            return None
        return (
            self.filter(run=run, outcome=run.evidence)
            .select_related("controlled_run")
            .order_by("-created_at", "-id")
            .first()
        )

    def reference_accuracies(self, run) -> list[tuple[str, list]]:
        """(provider, recorded accuracy) of the newest rerun of each of the cell's reference
        implementations (its providers that are not Liger's: torch, Transformers), for the
        correctness rule (runs.evidence_correctness.Reference)."""
        rows = (
            self.filter(
                run__is_current=True,
                run__publication_id=run.publication_id,
                run__environment_id=run.environment_id,
                run__benchmark_id=run.benchmark_id,
                run__workload_id=run.workload_id,
                run__timed_pass=run.timed_pass,
                facts__has_key="accuracy",
            )
            .exclude(run__implementation__provider_key__startswith="liger")
            .exclude(run_id=run.pk)
            .order_by("run_id", "-created_at", "-id")
            .values_list("run_id", "run__implementation__provider_key", "facts__accuracy")
        )
        newest = {}
        for run_id, provider, accuracy in rows:
            newest.setdefault(run_id, (provider, accuracy or []))
        return list(newest.values())

    def host_dominated_factors(self, run_ids) -> dict[int, float]:
        """{run id: factor} for runs whose newest such event found the published median a
        multiple of the GPU's device time (runs.evidence, "The source's host")."""
        rows = (
            self.filter(run_id__in=run_ids, facts__has_key="hostDominatedFactor")
            .order_by("run_id", "created_at", "id")
            .values_list("run_id", "facts__hostDominatedFactor")
        )
        return dict(rows)  # in time order, so the newest event of a run is the one kept

    def for_run(self, run) -> EvidenceEventQuerySet:
        return self.filter(run__public_id=run.public_id).select_related("controlled_run")

    def newest_rerun_median(self, run) -> tuple[float, str] | None:
        """(median, GPU) of the newest controlled rerun of the run (any revision), or None."""
        return (
            self.filter(run__public_id=run.public_id, controlled_run__isnull=False)
            .order_by("-created_at", "-id")
            .values_list(
                "controlled_run__median", "controlled_run__environment__gpu__upstream_name"
            )
            .first()
        )


# Reads written as SQL: the few that a reader arriving at a run nobody asked for pays, where
# Django compiling the query cost more than the database running it (runs.changes reads too).


def sql_table(model) -> str:
    """The model's table, quoted for the database."""
    return connection.ops.quote_name(model._meta.db_table)


def sql_marks(values: list) -> str:
    """One placeholder per value, for an IN list."""
    return ", ".join(["%s"] * len(values))


def sql_rows(sql: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def sql_columns(model, alias: str) -> str:
    """The model's concrete columns under a table alias, in field order (sql_instances)."""
    quote = connection.ops.quote_name
    return ", ".join(f"{alias}.{quote(f.column)}" for f in model._meta.concrete_fields)


def sql_instances(parts: list[tuple], row: tuple) -> list:
    """One instance per (model, alias) of `parts` from a row of their sql_columns, side by
    side: each value converted as the ORM converts it (JSON, and on SQLite dates and
    booleans), the instance made as the ORM makes a loaded one (Model.from_db)."""
    instances, start = [], 0
    for model, _ in parts:
        attnames, loaders = _loaders(model, connection.vendor)
        values = row[start : start + len(attnames)]
        converted = []
        for value, (column, converters) in zip(values, loaders, strict=True):
            for convert in converters:
                value = convert(value, column, connection)
            converted.append(value)
        instances.append(model.from_db(connection.alias, attnames, converted))
        start += len(attnames)
    return instances


@functools.cache
def _run_page_sql(run_model, vendor: str) -> tuple[str, list[tuple], list]:
    """RunQuerySet.run_page_or_404's query, its (model, alias) parts and the joined fields:
    the same text for every run, built once per process. `run_model` is the QuerySet's own
    and the claims' table is reached through their relation: this module imports no models
    (they import it)."""
    claim_model = run_model._meta.get_field("claims_as_better").related_model
    quote = connection.ops.quote_name
    joined = [run_model._meta.get_field(name) for name in ("workload", "group")]
    parts = [(run_model, "r")] + [(f.related_model, f"j{i}") for i, f in enumerate(joined)]
    joins = " ".join(
        f"INNER JOIN {sql_table(f.related_model)} j{i} "
        f"ON r.{quote(f.column)} = j{i}.{quote(f.target_field.column)}"
        for i, f in enumerate(joined)
    )
    runs, claims = sql_table(run_model), sql_table(claim_model)
    # r.is_current and l.is_current: the public rows (public()); one current revision per id
    # (Run.Meta). The leader, rank 1 of the group ("Compare with #1"), is asked for only for a
    # run ranked below it; whether the run is a side of a judged claim (then the page shows
    # its claims, the winner's too), for every run: both on the group's indexes.
    ranked_below = "WHEN r.rank > 1 THEN"
    sql = (
        f"SELECT {', '.join(sql_columns(m, a) for m, a in parts)}, "
        f"CASE {ranked_below} (SELECT l.public_id FROM {runs} l WHERE l.is_current "
        "AND l.group_id = r.group_id AND l.rank = 1 ORDER BY l.public_id LIMIT 1) END, "
        f"EXISTS (SELECT 1 FROM {claims} c WHERE c.group_id = r.group_id "
        "AND (c.better_id = r.id OR c.other_id = r.id)) "
        f"FROM {runs} r {joins} WHERE r.is_current AND r.public_id = %s"
    )
    return sql, parts, joined


@functools.cache
def _loaders(model, vendor: str) -> tuple[list[str], list[tuple]]:
    """The model's attnames and, per concrete field, its column and the converters the ORM
    applies to a value the database returns (the database's, then the field's)."""
    loaders = []
    for field in model._meta.concrete_fields:
        column = field.get_col(model._meta.db_table)
        converters = connection.ops.get_db_converters(column)
        loaders.append((column, converters + column.get_db_converters(connection)))
    return [f.attname for f in model._meta.concrete_fields], loaders

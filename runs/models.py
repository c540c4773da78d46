"""The run data model.

Every document-like thing (implementation, workload, protocol, environment, run) stores the
spec that its digest was computed from, so a manifest can be served without recomputation and
the digest can be re-verified at any time. Digests identify things and are unique where they do.
"""

from __future__ import annotations

import functools

from django.db import models
from django.urls import reverse

# The models of runs' rooms, imported here because Django loads an app's models from this
# module alone: changes across a source's publications (runs/changes/) and published speed-up
# claims re-judged by controlled reruns (runs/claims/). They name this module's models by
# string ("runs.Source"), never by import, so the arrow runs one way.
from runs.changes.models import CellChange, CellSeries, ChangeReview  # noqa: F401
from runs.claims.models import JudgedClaim  # noqa: F401
from runs.querysets import (
    BenchmarkQuerySet,
    ComparisonGroupQuerySet,
    EvidenceEventQuerySet,
    GpuQuerySet,
    LedgerQuerySet,
    PublicationQuerySet,
    RunQuerySet,
    TallyQuerySet,
)

DIGEST_LENGTH = 71  # "sha256:" + 64 hex


@functools.lru_cache(maxsize=10_000)
def page_url(name: str, *args: str) -> str:
    """reverse() of a page of the catalogue or a run, once per process for each: a run page
    links to its source, GPU, benchmark and group (and to itself, twice), and reverse() costs
    about 20 µs a call, its pattern match and quoting (a cold run page's links were a tenth of
    its CPU at 1M runs). The URL conf does not change while a process runs; the table holds
    the 10,000 most recent (about 260 bytes each, measured)."""
    return reverse(name, args=args)


class Evidence(models.TextChoices):
    REPORTED = "reported", "Reported"
    CHECKED = "checked", "Checked"
    REPRODUCED = "reproduced", "Reproduced"
    NOT_REPRODUCED = "not-reproduced", "Not reproduced"
    INCORRECT = "incorrect", "Incorrect"
    CONTROLLED = "controlled", "Controlled"


class TimedPass(models.TextChoices):
    FORWARD = "forward", "Forward"
    BACKWARD = "backward", "Backward"
    FULL = "full", "Full (forward + backward)"
    NO_GRAD_FORWARD = "no-grad-forward", "Forward without autograd"


class Metric(models.TextChoices):
    LATENCY = "latency", "Latency"
    MEMORY = "memory", "Peak memory"


class Source(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    license = models.CharField(max_length=64, blank=True)
    homepage = models.URLField(blank=True)
    harness_repository = models.URLField(blank=True)
    published_date = models.DateField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return page_url("runs:source", self.slug)


class Gpu(models.Model):
    """The GPU catalogue: one row per product and form factor seen in any source."""

    slug = models.SlugField(max_length=80, unique=True)
    upstream_name = models.CharField(max_length=120, unique=True)
    vendor = models.CharField(max_length=32)
    product = models.CharField(max_length=80)
    form_factor = models.CharField(max_length=80, blank=True)
    architecture = models.CharField(max_length=16)
    memory_gib = models.PositiveIntegerField(null=True, blank=True)
    # Datasheet peaks: dense (no sparsity) bf16 tensor-core rate and HBM/GDDR bandwidth.
    peak_bandwidth_gbs = models.FloatField(help_text="Peak memory bandwidth, GB/s (10^9 bytes)")
    peak_bf16_tflops = models.FloatField(help_text="Peak dense bf16 tensor rate, TFLOP/s")
    gpu_class = models.SlugField(max_length=32, help_text="Rerun queue class, e.g. h100, h200")

    objects = GpuQuerySet.as_manager()

    class Meta:
        ordering = ["vendor", "product", "form_factor"]
        constraints = [
            models.UniqueConstraint(
                fields=["vendor", "product", "form_factor"], name="gpu_unique_product"
            )
        ]

    def __str__(self) -> str:
        return self.upstream_name

    def get_absolute_url(self) -> str:
        return page_url("runs:gpu", self.slug)


class Benchmark(models.Model):
    slug = models.SlugField(max_length=80, unique=True)
    title = models.CharField(max_length=200)

    objects = BenchmarkQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        return page_url("runs:benchmark", self.slug)


class Project(models.Model):
    slug = models.SlugField(max_length=80, unique=True)
    name = models.CharField(max_length=200)
    url = models.URLField(blank=True)

    def __str__(self) -> str:
        return self.name


class Document(models.Model):
    """A digest-addressed manifest document: the digest covers apiVersion, kind and spec."""

    digest = models.CharField(max_length=DIGEST_LENGTH, unique=True)
    name = models.CharField(max_length=120)
    title = models.CharField(max_length=200)
    spec = models.JSONField()

    class Meta:
        abstract = True


class Implementation(Document):
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="implementations")
    display_name = models.CharField(max_length=120)
    provider_key = models.CharField(max_length=64, db_index=True)
    revision = models.CharField(max_length=80, default="unknown")

    def __str__(self) -> str:
        return self.display_name


class Workload(Document):
    benchmark = models.ForeignKey(Benchmark, on_delete=models.PROTECT, related_name="workloads")
    slug = models.CharField(max_length=200)
    label = models.CharField(max_length=300)
    parameters = models.JSONField()
    tensors = models.JSONField(default=list, help_text="Empty when the kernel's inputs are unknown")
    dtype = models.CharField(max_length=16, blank=True, db_index=True)
    comparator = models.CharField(max_length=64, default="not_asserted")

    def __str__(self) -> str:
        return self.label


class Protocol(Document):
    family = models.CharField(max_length=64, db_index=True)
    harness = models.CharField(max_length=120)
    timer = models.CharField(max_length=64)
    primary_statistic = models.CharField(max_length=32, default="median")
    timed_pass = models.CharField(max_length=16, choices=TimedPass.choices)
    metric = models.CharField(max_length=16, choices=Metric.choices)

    def __str__(self) -> str:
        return self.title


class Environment(Document):
    gpu = models.ForeignKey(Gpu, on_delete=models.PROTECT, related_name="environments")

    def __str__(self) -> str:
        return self.title


class Publication(models.Model):
    """One publication of a source: the benchmark CSV as a whole, or one upstream CI run.

    Ranks are computed inside a publication, never across them: two CI runs of the same cell
    are that cell's history, not competitors.
    """

    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="publications")
    slug = models.CharField(max_length=120)
    upstream_commit = models.CharField(max_length=40, blank=True)
    release = models.CharField(max_length=32, blank=True)
    sequence = models.PositiveIntegerField(default=0, help_text="Upstream order, e.g. CI run order")
    # Upstream's time: the newest observed time of its rows (a CI run's CSV stamps each row),
    # set by the ingest. Changes are dated and ordered by it, never by when they were detected.
    published_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = PublicationQuerySet.as_manager()

    class Meta:
        ordering = ["source", "sequence", "slug"]
        constraints = [
            models.UniqueConstraint(fields=["source", "slug"], name="publication_unique_slug")
        ]
        indexes = [
            # The source's changes page: its publications newest first by upstream's time.
            models.Index(
                fields=["source", "published_at", "sequence", "id"], name="publication_source_time"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source.slug}/{self.slug}"


class AppendOnly(models.Model):
    """A row written once: no save of an existing row, no delete (with AppendOnlyQuerySet)."""

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValueError(f"{type(self).__name__} is append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValueError(f"{type(self).__name__} is append-only")


class ImportRecord(AppendOnly):
    """The upstream ledger: one fetch of one upstream file, what came in, from where, and what
    it changed. Append-only, like EvidenceEvent: no save of an existing row, no delete.

    A file that comes back from the same upstream commit with other bytes is a silent rewrite
    (`rewrite_of` names the entry it contradicts); `revised_ids` are the runs it revised, each
    with its earlier revision kept. Failed fetches of a scheduled sync are entries too.
    """

    class Outcome(models.TextChoices):
        CREATED = "created", "Created runs"
        REVISED = "revised", "Revised runs"
        UNCHANGED = "unchanged", "Unchanged"
        FAILED = "failed", "Failed"

    APPLIED = (Outcome.CREATED, Outcome.REVISED, Outcome.UNCHANGED)

    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="imports")
    publication = models.ForeignKey(
        Publication, on_delete=models.PROTECT, related_name="imports", null=True, blank=True
    )
    location = models.CharField(max_length=500, help_text="URL or path the bytes came from")
    upstream_commit = models.CharField(max_length=40, blank=True)
    upstream_blob = models.CharField(max_length=40, blank=True, help_text="git blob id")
    sha256 = models.CharField(max_length=64, blank=True)
    rows = models.PositiveIntegerField()
    created = models.PositiveIntegerField()
    revised = models.PositiveIntegerField()
    unchanged = models.PositiveIntegerField()
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.CREATED)
    trigger = models.CharField(max_length=16, default="command", help_text="command, sync, ...")
    error = models.TextField(blank=True)
    rewrite_of = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="rewritten_by"
    )
    revised_ids = models.JSONField(
        default=list, blank=True, help_text="[public id, new revision] of each run it revised"
    )
    imported_at = models.DateTimeField(auto_now_add=True)

    objects = LedgerQuerySet.as_manager()

    class Meta:
        ordering = ["-imported_at", "-id"]
        indexes = [models.Index(fields=["source", "-imported_at"], name="import_source_time")]

    def __str__(self) -> str:
        return f"{self.location} at {self.imported_at:%Y-%m-%d %H:%M}"

    @property
    def silent_rewrite(self) -> bool:
        return self.rewrite_of_id is not None


class ComparisonGroup(models.Model):
    """Runs that may be ranked together.

    Same benchmark, timed pass, metric, workload, environment and protocol family, inside one
    publication and one upstream sweep. `cell_key` drops the publication, so it names the same cell across CI runs.
    """

    key = models.CharField(max_length=DIGEST_LENGTH, unique=True)
    cell_key = models.CharField(max_length=DIGEST_LENGTH)
    publication = models.ForeignKey(Publication, on_delete=models.PROTECT, related_name="groups")
    benchmark = models.ForeignKey(Benchmark, on_delete=models.PROTECT, related_name="groups")
    workload = models.ForeignKey(Workload, on_delete=models.PROTECT, related_name="groups")
    environment = models.ForeignKey(Environment, on_delete=models.PROTECT, related_name="groups")
    timed_pass = models.CharField(max_length=16, choices=TimedPass.choices)
    metric = models.CharField(max_length=16, choices=Metric.choices)
    family = models.CharField(max_length=64)
    sweep_name = models.CharField(max_length=64)
    size = models.PositiveIntegerField(default=0)

    objects = ComparisonGroupQuerySet.as_manager()

    class Meta:
        indexes = [
            # A run page's history: the ids of the cell's groups (one per publication), read
            # from the index alone, not from one table page per group.
            models.Index(fields=["cell_key"], include=["id"], name="group_cell_ids"),
        ]

    def __str__(self) -> str:
        return f"{self.benchmark.slug} {self.timed_pass} {self.metric} · {self.workload.label}"

    def get_absolute_url(self) -> str:
        return page_url("runs:group", self.key.removeprefix("sha256:")[:16])


# The rows every public read is limited to (RunQuerySet.public).
CURRENT = models.Q(is_current=True)
# What a cell's history reads of each run (RunQuerySet.history_of, runs/pages/run_sections.py),
# beside the history key and the time in run_history (PostgreSQL's INCLUDE; other databases
# ignore it), so a run page's window of its cell is read from the index alone.
HISTORY_COLUMNS = ["median", "public_id", "publication", "source", "id"]
# A history key is the comparison cell (ComparisonGroup.cell_key), "/", the provider key.
HISTORY_KEY_LENGTH = DIGEST_LENGTH + 1 + 64


def history_key(cell_key: str, provider_key: str) -> str:
    """The cell a run's history follows: its comparison cell and its implementation's provider
    (not the implementation row: a Liger row of each CI run names the commit it ran)."""
    return f"{cell_key}/{provider_key}"


class Run(models.Model):
    """One published measurement.

    Latency values are integer nanoseconds, memory values integer bytes (the unit column says
    which); `source_metrics` keeps the source's own numbers verbatim. A changed upstream row
    becomes a new revision with the same public id; older revisions stay, not current.
    """

    public_id = models.CharField(max_length=8)
    revision = models.PositiveSmallIntegerField(default=1)
    is_current = models.BooleanField(default=True)

    source = models.ForeignKey(
        Source, on_delete=models.PROTECT, related_name="runs", db_index=False
    )
    publication = models.ForeignKey(
        Publication, on_delete=models.PROTECT, related_name="runs", db_index=False
    )
    benchmark = models.ForeignKey(
        Benchmark, on_delete=models.PROTECT, related_name="runs", db_index=False
    )
    implementation = models.ForeignKey(
        Implementation, on_delete=models.PROTECT, related_name="runs", db_index=False
    )
    workload = models.ForeignKey(
        Workload, on_delete=models.PROTECT, related_name="runs", db_index=False
    )
    protocol = models.ForeignKey(
        Protocol, on_delete=models.PROTECT, related_name="runs", db_index=False
    )
    environment = models.ForeignKey(
        Environment, on_delete=models.PROTECT, related_name="runs", db_index=False
    )
    group = models.ForeignKey(
        ComparisonGroup, on_delete=models.PROTECT, related_name="runs", db_index=False
    )

    timed_pass = models.CharField(max_length=16, choices=TimedPass.choices)
    metric = models.CharField(max_length=16, choices=Metric.choices)
    unit = models.CharField(max_length=8)  # "ns" or "B"
    median = models.BigIntegerField()
    p20 = models.BigIntegerField(null=True)
    p80 = models.BigIntegerField(null=True)
    source_metrics = models.JSONField()
    sweep_name = models.CharField(max_length=64, help_text="The parameter the source swept")
    sweep_value = models.FloatField(null=True)

    observed_at = models.DateTimeField()
    status = models.CharField(max_length=16, default="passed")
    labels = models.JSONField(default=dict)
    external_id = models.CharField(max_length=400)
    name = models.CharField(max_length=120)
    title = models.CharField(max_length=300)
    spec = models.JSONField()
    digest = models.CharField(max_length=DIGEST_LENGTH)
    evidence = models.CharField(max_length=16, choices=Evidence.choices, default=Evidence.REPORTED)
    # history_key(group.cell_key, implementation.provider_key), written with the row by the
    # pipeline: a run page reads its cell's history as a window of one index on this and the
    # time, whatever the number of publications, instead of one probe per comparison group.
    history_key = models.CharField(max_length=HISTORY_KEY_LENGTH, default="", editable=False)

    # Written by the ranking query after every ingest (see runs.sources.ranking), never by hand.
    rank = models.PositiveIntegerField(null=True)

    created_at = models.DateTimeField(auto_now_add=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["public_id", "-revision"]
        constraints = [
            models.UniqueConstraint(fields=["public_id", "revision"], name="run_unique_revision"),
            models.UniqueConstraint(
                fields=["public_id"],
                condition=models.Q(is_current=True),
                name="run_one_current_revision",
            ),
            models.UniqueConstraint(
                fields=["source", "external_id", "revision"], name="run_unique_external_revision"
            ),
        ]
        # Every index here is read by something named beside it; each write pays for all of
        # them, so none is kept "in case" (tests/runs/test_indexes.py holds the schema to this list).
        # Foreign keys carry db_index=False and get their index here, once, or not at all.
        # The unique constraints above serve public_id (run page, revision manifests, new ids)
        # and (source, external_id) (the pipeline's lookup of existing rows, the API lookup).
        indexes = [
            # Group page and the run page's leader: runs of a group in rank order.
            models.Index(fields=["group", "rank"], name="run_group_rank"),
            # A run page's cell history: the current runs of one history key in time order, with
            # the columns the window reads, so the window around a run is an index-only range
            # of a few dozen entries and the per-source count one of the cell's entries.
            models.Index(
                fields=["history_key", "observed_at"],
                include=HISTORY_COLUMNS,
                name="run_history",
                condition=CURRENT,
            ),
            # The browse/API `benchmark` filter and `q` on benchmark names, sorted by the default
            # (newest observed) or by median: a benchmark's runs in page order, so a second
            # filter discards a few rows of that benchmark, not thousands of every other one.
            models.Index(
                fields=["benchmark", "observed_at", "id"],
                name="run_bench_observed",
                condition=CURRENT,
            ),
            models.Index(
                fields=["benchmark", "median", "id"], name="run_bench_median", condition=CURRENT
            ),
            # Ranking and the benchmark page: the current runs of one publication.
            models.Index(fields=["publication"], name="run_publication"),
            # Source page: a source's revised runs.
            models.Index(fields=["source", "-revision"], name="run_source_revision"),
            # Filters, and `q` on GPU, implementation and workload names.
            models.Index(fields=["environment"], name="run_environment"),
            models.Index(fields=["implementation"], name="run_implementation"),
            # The workload's publication second: a failed correctness check reads the other
            # providers' accuracies of its cell in its publication (EvidenceEvent.objects.
            # reference_accuracies), a few hundred rows by workload, thousands by any other
            # column (17 ms a query on SQLite by the benchmark's index, 0.5 ms by this one).
            models.Index(fields=["workload", "publication"], name="run_workload_publication"),
            models.Index(fields=["timed_pass"], name="run_timed_pass"),
            models.Index(fields=["metric"], name="run_metric"),
            models.Index(fields=["evidence"], name="run_evidence"),
            # Sorts (browse, API list, home, feed): the sort column then the unique tie-breaker,
            # so keyset pages start inside the index, read forwards or backwards. Only current
            # runs are ever sorted, so superseded revisions stay out of these four.
            models.Index(fields=["median", "id"], name="run_median_id", condition=CURRENT),
            models.Index(fields=["observed_at", "id"], name="run_observed_id", condition=CURRENT),
            models.Index(fields=["created_at", "id"], name="run_created_id", condition=CURRENT),
            models.Index(fields=["rank", "id"], name="run_rank_id", condition=CURRENT),
        ]

    def __str__(self) -> str:
        return f"Run {self.public_id}"

    def get_absolute_url(self) -> str:
        return page_url("runs:detail", self.public_id)


class Version(models.Model):
    """How many times what one scope of the public pages shows has been written: "data" (run
    data), "activity" and "activity:unscoped" (community and rerun writes), "run:<public id>"
    (writes about one run). runs/read/freshness.py says which write moves which and which page
    reads which.

    Database triggers (freshness.triggers_install, run after every migrate) move the rows in
    the same transaction as the write, whatever made it: save(), update(), bulk_create, COPY
    or raw SQL. Pages are cached under the versions they read, so no write path can forget
    to retire a page, and a write retires only the pages that read what it wrote.
    """

    scope = models.CharField(max_length=64, primary_key=True)
    value = models.BigIntegerField(default=0)
    changed_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"{self.scope} version {self.value}"


class Tally(models.Model):
    """How many current runs and comparison groups each (benchmark, environment, source) has:
    the home page's counts, read as these few hundred rows instead of a scan of every run.

    Kept by database triggers (runs/read/tallies.py, installed after every migrate) in the
    transaction of each write to runs_run or runs_comparisongroup, whatever made it (the
    pipeline's COPY, an update retiring a revision, a delete), so a tally always equals the
    COUNT it stands for. Plain ids, not foreign keys: the rows are the tables' own arithmetic.
    """

    benchmark_id = models.BigIntegerField()
    environment_id = models.BigIntegerField()
    source_id = models.BigIntegerField()
    runs = models.BigIntegerField(default=0)
    groups = models.BigIntegerField(default=0)

    objects = TallyQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["benchmark_id", "environment_id", "source_id"], name="tally_unique_cell"
            )
        ]

    def __str__(self) -> str:
        return f"tally b{self.benchmark_id} e{self.environment_id} s{self.source_id}"


# Evidence history.


class EvidenceEvent(AppendOnly):
    """One application of a controlled rerun's outcome to a run: append-only.

    Written only by runs.evidence.evidence_apply, in the same transaction that moves
    Run.evidence, so the level and its history cannot disagree. `cause` names the rerun job
    as text ("rerun-job:<uuid>") because runs must not import the reruns app.
    """

    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="evidence_events")
    from_level = models.CharField(max_length=16, choices=Evidence.choices)
    to_level = models.CharField(max_length=16, choices=Evidence.choices)
    outcome = models.CharField(max_length=16, choices=Evidence.choices)
    cause = models.CharField(max_length=200)
    cause_job = models.UUIDField(null=True, blank=True, db_index=True)
    controlled_run = models.ForeignKey(
        Run, on_delete=models.PROTECT, null=True, blank=True, related_name="evidence_caused"
    )
    facts = models.JSONField(default=dict, help_text="What the rule compared, and the rule")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = EvidenceEventQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.run.public_id}: {self.from_level} → {self.to_level}"

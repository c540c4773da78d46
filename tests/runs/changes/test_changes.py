"""The change rule (runs/changes/detect.py) on synthetic histories, and what
runs.changes.services stores from an ingested history."""

from __future__ import annotations

import random
import re
import statistics

import pytest

from runs.changes import detect
from runs.changes.models import CellChange, CellSeries
from runs.changes.services import changes_detect
from runs.models import Source
from runs.sources.pipeline import ingest
from tests.synthetic_ci import BASE, commit, suite_cells, write_history

FLAT = [1.00, 1.01, 0.99, 1.00, 1.02, 0.98, 1.00, 1.01]
# A median of 1.0 with a robust spread of 1.5 %: the threshold is 4 * 1.5 % = 5.9 %.
UP = [1.40, 1.42, 1.38]


@pytest.mark.parametrize(
    ("name", "values", "status", "found"),
    [
        ("steady", FLAT + [1.01, 0.99], detect.JUDGED, []),
        ("step up persists", FLAT + [1.30, 1.31, 1.29], detect.JUDGED,
         [(8, detect.STEP, detect.REGRESSION)]),
        ("step down persists", FLAT + [0.70, 0.71], detect.JUDGED,
         [(8, detect.STEP, detect.IMPROVEMENT)]),
        ("one point off, back at the next", FLAT + [1.50, 1.00, 1.01], detect.JUDGED,
         [(8, detect.OUTLIER, detect.REGRESSION)]),
        ("off at the newest point: not settled", FLAT + [1.40], detect.JUDGED,
         [(8, detect.PENDING, detect.REGRESSION)]),
        # Significant (the t-test splits it) but inside the baseline's threshold.
        ("a move inside the threshold", FLAT + [1.04] * 6, detect.JUDGED, []),
        ("noisy points", [1.0, 1.6, 0.7, 1.5, 0.8, 1.7, 0.6, 1.4, 1.0], detect.NOISY, []),
        ("one point", [1.0], detect.SHORT, []),
        ("judged from the second publication", [2.5, 1.8, 1.81, 1.79, 1.8, 1.8], detect.JUDGED,
         [(1, detect.STEP, detect.IMPROVEMENT)]),
        ("a large step is not noise", FLAT + [3.0] * 8, detect.JUDGED,
         [(8, detect.STEP, detect.REGRESSION)]),
        ("three publications off, then back: one transient", FLAT + UP + [1.0, 1.01, 0.99],
         detect.JUDGED, [(8, detect.TRANSIENT, detect.REGRESSION)]),
        ("back after the newest point only", FLAT + UP + [1.0], detect.JUDGED,
         [(8, detect.TRANSIENT, detect.REGRESSION)]),
        ("off for longer than a transient: a step, and a step back", FLAT + [2.0] * 5 + [1.0, 1.0],
         detect.JUDGED,
         [(8, detect.STEP, detect.REGRESSION), (13, detect.STEP, detect.IMPROVEMENT)]),
        ("still off: a step while it holds", FLAT + UP + [1.41], detect.JUDGED,
         [(8, detect.STEP, detect.REGRESSION)]),
    ],
)  # fmt: skip
def test_rule(name, values, status, found):
    verdict = detect.detect(values, metric="latency")
    assert verdict.status == status, name
    assert [(c.index, c.kind, c.direction) for c in verdict.changes] == found, name


def test_a_step_reports_its_baseline_and_the_threshold_it_passed():
    (change,) = detect.detect(FLAT + [1.30, 1.30], metric="latency").changes
    assert change.before == pytest.approx(1.0)
    assert change.shift == pytest.approx(0.30)
    assert change.threshold == pytest.approx(4 * 1.4826 * 0.01)


def test_a_transient_has_its_span():
    (change,) = detect.detect(FLAT + UP + [1.0, 1.01], metric="latency").changes
    assert (change.index, change.until) == (8, 10)
    assert change.after == pytest.approx(1.40)


def test_a_step_cannot_widen_its_own_threshold():
    """The threshold comes from the points before the step: the same whether the new level
    lasted 3 publications or 24, and whatever the history's spread with the step in it
    (here a p95 of about 28 %, which the old rule's cell tolerance would have been)."""
    before = [2.50, 2.49, 2.51, 2.50, 2.48]
    short = detect.detect(before + [1.80, 1.81, 1.79], metric="latency").changes
    long = detect.detect(before + [1.80, 1.81, 1.79] * 8, metric="latency").changes
    assert [(c.index, c.kind) for c in short] == [(5, detect.STEP)]
    assert [(c.index, c.kind) for c in long] == [(5, detect.STEP)]
    assert short[0].threshold == long[0].threshold == detect.threshold(before, metric="latency")[1]
    assert short[0].threshold == pytest.approx(0.05)  # the floor: the baseline barely moves


def test_memory_has_its_own_floor():
    """Peak memory repeats to the byte: a 2 % move is a step, a 0.5 % move is not."""
    base = [5640.0] * 6
    assert [c.kind for c in detect.detect(base + [5753.0] * 4, metric="memory").changes] == [
        detect.STEP
    ]
    assert detect.detect(base + [5668.0] * 4, metric="memory").changes == []


def test_the_outlier_is_left_out_of_the_next_baseline():
    """A point judged an outlier is no part of the level the next points are judged against."""
    values = FLAT + [9.0, 1.0, 1.0, 1.0, 1.35, 1.35]
    verdict = detect.detect(values, metric="latency")
    assert [(c.index, c.kind) for c in verdict.changes] == [(8, "outlier"), (12, "step")]
    assert verdict.changes[1].before == pytest.approx(1.0)


# A baseline with a robust spread of about 6 %: one point needs 4 * 6 % = 23 % to count.
SPREAD = [1.00, 1.06, 0.95, 1.03, 0.97, 1.05, 0.94, 1.02]
SMALL = [1.13, 1.19, 1.08, 1.16, 1.10, 1.18, 1.07, 1.15, 1.12, 1.17, 1.09, 1.14]


def test_a_lasting_level_is_held_to_the_standard_error_of_two_levels():
    """+12 % for twelve publications is inside one point's threshold (23 %) but a median of
    twelve points against one of eight: its threshold is 4 s * sqrt(1/8 + 1/12), from the
    baseline's spread only."""
    (change,) = detect.detect(SPREAD + SMALL, metric="latency").changes
    assert (change.index, change.kind, change.direction) == (8, detect.STEP, detect.REGRESSION)
    _, point = detect.threshold(SPREAD, metric="latency")
    assert change.threshold == pytest.approx(point * (1 / 8 + 1 / 12) ** 0.5)
    assert change.threshold == detect.level_threshold(SPREAD, 12, metric="latency")
    assert change.threshold < change.shift < point


def test_a_small_move_that_comes_back_is_no_step():
    """The same +12 %, three publications long and then back: not a level that lasted."""
    assert detect.detect(SPREAD + SMALL[:3] + SPREAD + SPREAD, metric="latency").changes == []


def test_an_outlier_before_a_lasting_level_is_an_outlier_and_the_level_a_step():
    """One publication at +58 %, then +12 % for twelve: the outlier is not the level's start
    and the level is judged on its own points, as a step from the next publication."""
    changes = detect.detect(SPREAD + [1.6] + SMALL, metric="latency").changes
    assert [(c.index, c.kind) for c in changes] == [(8, detect.OUTLIER), (9, detect.STEP)]
    assert changes[1].after == pytest.approx(statistics.median(SMALL))


# Point-to-point noise of about 20 %: no single publication can be told from it.
NOISY = [0.87, 1.02, 0.93, 1.05, 1.06, 0.78, 0.76, 1.17, 0.88, 0.87]
NOISY_UP = [2.0, 1.58, 1.87, 1.58, 1.71, 1.32, 1.71, 1.89, 1.62, 1.79, 1.74, 1.25, 1.81, 1.67]


def test_a_noisy_cell_is_judged_only_on_its_lasting_levels():
    """In a cell too noisy for single points, a level that moved +89 % for fourteen
    publications is a step; without it the cell is noisy and nothing is reported."""
    verdict = detect.detect(NOISY + NOISY_UP, metric="latency")
    assert detect.SIGMAS * detect.point_noise(NOISY + NOISY_UP) > detect.CEILING
    assert verdict.status == detect.JUDGED
    assert [(c.index, c.kind, c.direction) for c in verdict.changes] == [
        (10, detect.STEP, detect.REGRESSION)
    ]
    flat = NOISY + [0.95, 1.21, 0.8, 1.1, 0.77, 1.19, 1.0, 0.83, 1.24, 0.9, 1.12, 0.79, 1.2, 0.92]
    assert detect.detect(flat, metric="latency") == detect.Verdict(detect.NOISY)


@pytest.mark.parametrize("seed", range(40))
def test_the_change_points_are_otavas(seed):
    """runs.changes.detect.change_points is apache-otava's compute_change_points with its
    command-line defaults, without numpy: the same points and p-values."""
    analysis = pytest.importorskip("otava.analysis")
    rng = random.Random(seed)
    n = rng.randint(2, 70)
    cut, height = rng.randint(1, n), rng.choice([1.0, 1.05, 1.3, 2.0])
    series = [round(rng.gauss(1.0 if i < cut else height, 0.03), 4) for i in range(n)]
    theirs, _ = analysis.compute_change_points(list(series), window_len=50, max_pvalue=0.001)
    ours = detect.change_points(series)
    assert [p.index for p in ours] == [p.index for p in theirs]
    for a, b in zip(ours, theirs, strict=True):
        assert a.pvalue == pytest.approx(float(b.stats.pvalue), rel=1e-6, abs=1e-12)


def test_grouping_needs_many_cells_of_several_kernels():
    assert detect.grouped(["a"] * 4 + ["b"] * 3 + ["c"] * 3)
    assert not detect.grouped(["a"] * 20)  # one kernel's sweep moving: the kernel
    assert not detect.grouped(["a", "b", "c"] * 3)  # nine cells


@pytest.fixture
def history(tmp_path):
    write_history(tmp_path, suite_cells())
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])
    return tmp_path


def _changes():
    return sorted(
        (c.benchmark.slug, c.provider_key, c.publication.slug, c.kind, c.direction, c.grouped)
        for c in CellChange.objects.select_related("benchmark", "publication")
    )


@pytest.mark.django_db
def test_ingest_stores_the_changes_and_groups_the_suite_shift(history):
    found = _changes()
    suite = [c for c in found if c[0].startswith("suite_")]
    assert len(suite) == 12
    assert {c[2:] for c in suite} == {(commit(8), "step", "regression", True)}
    assert ("own_kernel", "liger", commit(9), "step", "regression", False) in found
    assert ("own_kernel", "torch", commit(9), "outlier", "regression", False) in found
    assert len(found) == 14
    statuses = dict(
        CellSeries.objects.values_list("benchmark__slug", "status").filter(provider_key="liger")
    )
    assert statuses["noisy_kernel"] == "noisy" and statuses["own_kernel"] == "judged"


@pytest.mark.django_db
def test_detection_is_idempotent(history):
    before = _changes()
    source = Source.objects.get(slug="liger-kernel-ci")
    report = changes_detect(source=source)
    assert report.new_steps == []
    assert _changes() == before
    # Ingesting the same files again touches nothing.
    ingest(source_slug="liger-kernel-ci", locations=[str(history)])
    assert _changes() == before


@pytest.mark.django_db
def test_a_new_publication_settles_a_pending_point(tmp_path):
    cells = {("late_kernel", "liger"): BASE + [2.0]}
    write_history(tmp_path, cells)
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])
    assert [c[3] for c in _changes()] == ["pending"]
    write_history(tmp_path, {("late_kernel", "liger"): BASE + [2.0, 2.0]}, first=9)
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])
    assert [c[2:5] for c in _changes()] == [(commit(8), "step", "regression")]


@pytest.mark.django_db
def test_an_excursion_of_the_host_is_stored_once_per_cell_with_its_span(tmp_path):
    """Twelve cells of four kernels 40 % slower for three CI runs, then back: one grouped
    transient per cell at the first of them, until the third; no steps."""
    cells = {
        (f"suite_{k}", p): BASE + UP + [1.0, 1.01, 0.99]
        for k in range(4)
        for p in ("liger", "torch", "huggingface")
    }
    write_history(tmp_path, cells)
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])
    rows = CellChange.objects.values_list("kind", "publication__slug", "until__slug", "grouped")
    assert sorted(rows) == [("transient", commit(8), commit(10), True)] * 12
    # Detection once more gives the same rows.
    changes_detect(source=Source.objects.get(slug="liger-kernel-ci"))
    assert sorted(rows.all()) == [("transient", commit(8), commit(10), True)] * 12


@pytest.mark.django_db
def test_a_step_is_lasting_only_while_it_holds(tmp_path):
    """Off for three runs and still off: a step. Two more runs back at the old level turn it
    into a transient, and nothing new is announced."""
    write_history(tmp_path, {("late_kernel", "liger"): BASE + UP})
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])
    assert [c[2:5] for c in _changes()] == [(commit(8), "step", "regression")]
    write_history(tmp_path, {("late_kernel", "liger"): BASE + UP + [1.0, 1.0]}, first=11)
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])
    assert [c[2:5] for c in _changes()] == [(commit(8), "transient", "regression")]
    report = changes_detect(source=Source.objects.get(slug="liger-kernel-ci"))
    assert report.new_steps == []


@pytest.mark.django_db
def test_the_feed_carries_a_host_excursion_once_and_a_transient_with_its_span(client, tmp_path):
    """Twelve cells of four kernels off for three runs and back: one feed entry for the host,
    with its size and span; a kernel of its own off for three runs and back: its own
    transient entry; a lasting step as before. Dated by the publication where each began."""
    cells = {
        (f"suite_{k}", p): BASE + UP + [1.0, 1.01, 0.99]
        for k in range(4)
        for p in ("liger", "torch", "huggingface")
    }
    cells["own_kernel", "liger"] = BASE + [1.0, 1.01] + UP + [1.0]
    cells["step_kernel", "liger"] = BASE + [1.0, 2.0, 2.0, 2.01, 2.0]
    write_history(tmp_path, cells)
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])
    feed = client.get("/feeds/sources/liger-kernel-ci/changes.atom").content.decode()
    titles = re.findall(r"<entry><title>(.*?)</title>", feed, re.S)
    assert titles[0].startswith(
        f"Transient regression +40 % at {commit(10)}, back after {commit(12)}: Own kernel"
    )
    assert titles[1].startswith(f"Regression +100 % at {commit(9)}: Step kernel")
    assert titles[2] == (
        f"Excursion of the benchmark host at {commit(8)}, back after {commit(10)}: 12 cells slower"
    )
    assert len(titles) == 3
    assert feed.count(f"/changes/liger-kernel-ci/host/{commit(8)}/regression") == 1

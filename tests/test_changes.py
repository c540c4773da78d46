"""The change rule (runs/changes/detect.py) on synthetic histories, and what
runs.changes.services stores from an ingested history."""

from __future__ import annotations

import pytest

from runs.changes import detect
from runs.changes.models import CellChange, CellSeries
from runs.changes.services import changes_detect
from runs.models import Source
from runs.services import ingest
from tests.synthetic_ci import BASE, commit, suite_cells, write_history

FLAT = [1.00, 1.01, 0.99, 1.00, 1.02, 0.98, 1.00, 1.01]


@pytest.mark.parametrize(
    ("name", "values", "tolerance", "status", "found"),
    [
        ("steady", FLAT + [1.01, 0.99], 0.05, detect.JUDGED, []),
        ("step up persists", FLAT + [1.30, 1.31, 1.29], 0.05, detect.JUDGED,
         [(8, detect.STEP, detect.REGRESSION)]),
        ("step down persists", FLAT + [0.70, 0.71], 0.05, detect.JUDGED,
         [(8, detect.STEP, detect.IMPROVEMENT)]),
        ("one point off, back at the next", FLAT + [1.50, 1.00, 1.01], 0.05, detect.JUDGED,
         [(8, detect.OUTLIER, detect.REGRESSION)]),
        ("off at the newest point: not settled", FLAT + [1.40], 0.05, detect.JUDGED,
         [(8, detect.PENDING, detect.REGRESSION)]),
        ("a move inside the cell's tolerance", FLAT + [1.08, 1.08, 1.08], 0.10, detect.JUDGED, []),
        ("noisy points", [1.0, 1.6, 0.7, 1.5, 0.8, 1.7, 0.6, 1.4, 1.0], 0.05, detect.NOISY, []),
        ("tolerance past the ceiling", FLAT + [2.0, 2.0], 0.60, detect.NOISY, []),
        ("too few points", [1.0, 1.0, 2.0, 2.0], 0.05, detect.SHORT, []),
        ("a large step is not noise", FLAT + [3.0] * 8, 0.05, detect.JUDGED,
         [(8, detect.STEP, detect.REGRESSION)]),
        ("two steps, the second judged on the new level", FLAT + [2.0] * 5 + [1.0, 1.0],
         0.05, detect.JUDGED,
         [(8, detect.STEP, detect.REGRESSION), (13, detect.STEP, detect.IMPROVEMENT)]),
    ],
)  # fmt: skip
def test_rule(name, values, tolerance, status, found):
    verdict = detect.detect(values, tolerance=tolerance)
    assert verdict.status == status, name
    assert [(c.index, c.kind, c.direction) for c in verdict.changes] == found, name


def test_a_step_reports_its_baseline_and_the_threshold_it_passed():
    (change,) = detect.detect(FLAT + [1.30, 1.30], tolerance=0.05).changes
    assert change.before == pytest.approx(1.0)
    assert change.shift == pytest.approx(0.30)
    assert change.threshold >= 0.05


def test_the_outlier_is_left_out_of_the_next_baseline():
    """A point judged an outlier is no part of the level the next points are judged against."""
    values = FLAT + [9.0, 1.0, 1.0, 1.0, 1.35, 1.35]
    verdict = detect.detect(values, tolerance=0.05)
    assert [(c.index, c.kind) for c in verdict.changes] == [(8, "outlier"), (12, "step")]
    assert verdict.changes[1].before == pytest.approx(1.0)


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

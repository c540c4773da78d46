"""The run page's window on its cell's history is the slice of the whole history around the run:
checked for every run of a cell longer than the window, with points published at the same time
(the history orders those by publication sequence)."""

from __future__ import annotations

import pytest

from runs.models import Run
from runs.pages import run_sections
from runs.read import catalogue
from runs.sources.pipeline import ingest
from tests.synthetic_ci import commit, write_history

N = 61  # CI runs: longer than the window on both sides of a run in the middle
TIED = {5, 6, 20, 21, 22, 40, 41}  # CI runs published at the time of the one before them


@pytest.fixture
def long_cell(db, tmp_path):
    write_history(tmp_path, {("window_kernel", "liger"): [1.0 + i / 100 for i in range(N)]})
    for i in sorted(TIED):  # the timestamp (second to last column) of the CI run before
        csv_path = tmp_path / commit(i) / "benchmark.csv"
        stamp = (tmp_path / commit(i - 1) / "benchmark.csv").read_text().splitlines()[1]
        stamp = stamp.split(",")[-2]
        lines = csv_path.read_text().splitlines()
        cells = lines[1].split(",")
        cells[-2] = stamp
        csv_path.write_text("\n".join([lines[0], ",".join(cells)]) + "\n")
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])
    runs = list(Run.objects.public().filter(benchmark__slug="window_kernel").order_by("id"))
    assert len(runs) == N
    return runs


def _expected(run: Run) -> list[str]:
    """The definition: the whole history in its order, HISTORY_SHOWN points around the run,
    at most half of them after it when both sides have more."""
    whole = [r.public_id for r in Run.objects.history_of(run)]
    at = whole.index(run.public_id)
    before, after = whole[:at][::-1], whole[at:]
    size = run_sections.HISTORY_SHOWN
    before, after = before[:size], after[:size]
    n_after = min(len(after), size - min(len(before), size // 2))
    return before[: size - n_after][::-1] + after[:n_after]


def test_every_window_is_the_slice_of_the_whole_history(long_cell):
    observed = {r.observed_at for r in long_cell}
    assert len(observed) == N - len(TIED)  # the ties are there
    for run in long_cell:
        run = Run.objects.for_run_page().get(pk=run.pk)
        catalogue.attach([run])
        part = run_sections.history(run)
        assert [p["public_id"] for p in part["points"]] == _expected(run), run.publication.slug
        assert part["total"] == N
        assert {p["publication__slug"] for p in part["points"]} <= {commit(i) for i in range(N)}
        assert {p["source__slug"] for p in part["points"]} == {"liger-kernel-ci"}


def test_a_tie_is_ordered_by_publication_sequence(long_cell):
    # CI runs 20, 21 and 22 share the time of 19: the history runs 19, 20, 21, 22 in CI order.
    run = next(r for r in long_cell if r.publication.slug == commit(21))
    run = Run.objects.for_run_page().get(pk=run.pk)
    catalogue.attach([run])
    slugs = [p["publication__slug"] for p in run_sections.history(run)["points"]]
    at = slugs.index(commit(21))
    assert slugs[at - 2 : at + 2] == [commit(19), commit(20), commit(21), commit(22)]

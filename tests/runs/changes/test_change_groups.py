"""A group's line on the changes page (issue 44): its median move is that of every cell of the
group's kernels at the publication, not only of the cells that crossed their thresholds; a
transient group names each end of its span with its cells, not the first cell's end."""

from __future__ import annotations

import statistics

import pytest

from runs.changes.models import CellChange
from runs.sources.pipeline import ingest
from tests.pages import text_of
from tests.synthetic_ci import BASE, commit, write_history

pytestmark = pytest.mark.django_db

PROVIDERS = ("liger", "torch", "huggingface")


def test_a_groups_median_move_is_of_every_cell_of_its_kernels(client, tmp_path, settings):
    settings.PAGE_CACHE_SECONDS = 0
    cells = {(f"suite_{k}", p): BASE + [1.6] * 4 for k in range(4) for p in PROVIDERS}
    # Five more implementations of each kernel that did not move: the suite's median row.
    cells |= {(f"suite_{k}", f"flat{i}"): BASE + [1.0] * 4 for k in range(4) for i in range(5)}
    write_history(tmp_path, cells)
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])
    group = CellChange.objects.filter(grouped=True, publication__slug=commit(8))
    assert group.count() == 12
    everyone = [v[8] / v[7] - 1 for v in cells.values()]
    assert [(c.group_shift, c.group_cells) for c in group] == [
        (pytest.approx(statistics.median(everyone)), 32)
    ] * 12
    text = text_of(client.get("/sources/liger-kernel-ci/changes/"))
    assert (
        f"median move of all 32 cells of these kernels {statistics.median(everyone) * 100:+.1f} %, "
        f"of the 12 beyond their thresholds +60 %" in text
    )


def test_a_transient_group_names_each_end_of_its_span(client, tmp_path, settings):
    settings.PAGE_CACHE_SECONDS = 0
    short, long = BASE + [1.6, 1.6] + [1.0] * 4, BASE + [1.6, 1.6, 1.6] + [1.0] * 3
    cells = {(f"suite_{k}", p): short for k in range(4) for p in PROVIDERS[:2]}
    cells |= {(f"suite_{k}", "huggingface"): long for k in range(4)}
    write_history(tmp_path, cells)
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])
    group = CellChange.objects.filter(grouped=True, kind=CellChange.TRANSIENT)
    assert sorted(c.until.slug for c in group) == [commit(9)] * 8 + [commit(10)] * 4
    text = text_of(client.get("/sources/liger-kernel-ci/changes/"))
    assert (
        f"12 cells of 4 kernels moved together at {commit(8)} (a transient regression, back "
        f"after {commit(9)} (8 cells), {commit(10)} (4 cells);" in text
    )

"""bench/scale.py: its synthetic CI feeds go through the real ingest, and its report divides
the right figures."""

from __future__ import annotations

import csv
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from runs.models import Publication, Run
from runs.sources.pipeline import ingest
from tests.conftest import LIGER_CI

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import scale  # noqa: E402

# The smallest CI run (54 rows), and a commit that upstream ran twice, once as a release.
SMALL = ["b6ed735", "0a62700", "0a62700-v0.6.4"]


def _timestamps(path: Path) -> list[datetime]:
    with path.open(newline="") as f:
        return [datetime.strptime(r["timestamp"], scale.TS_FORMAT) for r in csv.DictReader(f)]


@pytest.mark.django_db
def test_relabelled_copies_are_new_publications_the_ingest_accepts(tmp_path):
    original = ingest(source_slug="liger-kernel-ci", locations=[str(LIGER_CI / SMALL[0])])
    rows = sum(scale.data_rows(LIGER_CI / f / "benchmark.csv") for f in SMALL)

    names = {}
    for copy in (1, 2):
        names[copy] = scale.relabel(LIGER_CI, tmp_path / str(copy), copy, SMALL)
        reports = ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path / str(copy))])
        assert [r.publication for r in reports] == names[copy]
        assert sum(r.created for r in reports) == sum(r.rows for r in reports) == rows
        for folder, name in zip(SMALL, names[copy], strict=True):
            moved = _timestamps(tmp_path / str(copy) / name / "benchmark.csv")
            before = _timestamps(LIGER_CI / folder / "benchmark.csv")
            assert moved == [t + timedelta(days=copy) for t in before]

    slugs = [original[0].publication, *names[1], *names[2]]
    assert len(set(slugs)) == 7
    assert set(Publication.objects.values_list("slug", flat=True)) == set(slugs)
    assert names[1] == [scale.copy_commit(1, f) for f in SMALL]
    assert Run.objects.public().count() == original[0].rows + 2 * rows
    # Nothing is written next to the real data.
    assert not [n for n in names[1] + names[2] if (LIGER_CI / n).exists()]


def _row(page, mode, rps, trivial, queries=7):
    return {
        "page": page,
        "mode": mode,
        "rps": rps,
        "trivial_rps": trivial,
        "p50_ms": 12.0,
        "p99_ms": 40.0,
        "errors": 0,
        "requests": 100,
        "queries": queries,
    }


def test_table_divides_by_the_trivial_view_and_by_the_first_size():
    small = {"label": "80k", "pages": [_row("run page", "uncached", 100.0, 1000.0)]}
    large = {"label": "1m", "pages": [_row("run page", "uncached", 40.0, 800.0, queries=9)]}
    table = scale.pages_table([small, large])
    header, _, line = table.splitlines()
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert header.split("|")[-2].strip() == "1m/80k"
    # 100/1000 = 0.100 at 80k, 40/800 = 0.050 at 1m, and 0.050/0.100 = 0.50.
    assert cells == ["run page", "uncached", "100", "0.100", "12/40", "0", "7",
                     "40", "0.050", "12/40", "0", "9", "0.50"]  # fmt: skip


def test_sizes_read_as_written():
    assert [scale.parse_size(s) for s in ("80k", "1m", "300K", "1,000,000")] == [
        80_000,
        1_000_000,
        300_000,
        1_000_000,
    ]
    assert [scale.size_label(n) for n in (80_000, 1_000_000, 300_000)] == ["80k", "1m", "300k"]


def test_every_url_pattern_has_a_figure_or_a_reason():
    """A page kind added to the site without a figure in bench/scale.py fails here."""
    patterns = scale.url_patterns()
    measured = {name for _, name in scale.PAGE_KINDS}
    assert [p for p in patterns if p not in measured and p not in scale.NOT_MEASURED] == []
    # And nothing is measured or excused that the site does not have.
    assert measured | set(scale.NOT_MEASURED) <= set(patterns)


def test_the_scan_finds_a_page_without_a_figure(settings):
    import types

    from django.urls import clear_url_caches, include, path

    from runs.pages import views

    urls = types.ModuleType("scale_test_urls")
    urls.urlpatterns = [
        path("", include("kernelindex.urls")),
        path("new/", views.healthz, name="new-page"),
    ]
    sys.modules[urls.__name__] = urls
    settings.ROOT_URLCONF = urls.__name__
    clear_url_caches()
    try:
        assert "new-page" in scale.url_patterns()
        assert "new-page" not in {name for _, name in scale.PAGE_KINDS} | set(scale.NOT_MEASURED)
    finally:
        del sys.modules[urls.__name__]
        clear_url_caches()

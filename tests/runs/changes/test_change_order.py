"""Changes newest publication first by upstream's time, dated by the publication, on the
source's changes page, in the API and in the feeds (issue 44): two publications ingested one
folder at a time (as `manage.py ingest liger-kernel-ci <folder>` does, with no place in
commits.txt) come first, and a re-detection neither re-dates nor reorders an entry."""

from __future__ import annotations

import re
from datetime import UTC, timedelta

import pytest

from runs.changes.models import CellChange
from runs.changes.services import changes_detect
from runs.models import Publication, Source
from runs.sources.pipeline import ingest
from tests.pages import text_of
from tests.synthetic_ci import BASE, START, commit, suite_cells, write_history

pytestmark = pytest.mark.django_db

SOURCE = "/sources/liger-kernel-ci/changes/"
FEED = "/feeds/sources/liger-kernel-ci/changes.atom"


@pytest.fixture
def two_new(tmp_path, settings):
    """The suite's twelve publications from the root, then two more folder by folder, in
    which a kernel of its own got 1.6x slower and stayed."""
    settings.PAGE_CACHE_SECONDS = 0
    cells = {**suite_cells(), ("late_kernel", "liger"): BASE + [1.0] * 4}
    write_history(tmp_path, cells)
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])
    cells = {k: v + [v[-1]] * 2 for k, v in cells.items()}
    cells["late_kernel", "liger"][-2:] = [1.6, 1.6]
    write_history(tmp_path, cells, first=12)
    ingest(
        source_slug="liger-kernel-ci",
        locations=[str(tmp_path / commit(12)), str(tmp_path / commit(13))],
    )
    return cells


def _entries(feed: str) -> list[tuple[str, str]]:
    return re.findall(r"<entry><title>(.*?)</title>.*?<updated>(.*?)</updated>", feed, re.S)


def test_the_publications_are_dated_by_upstream_not_by_the_ingest(two_new):
    source = Source.objects.get(slug="liger-kernel-ci")
    new = Publication.objects.get(source=source, slug=commit(13))
    assert new.sequence == 0  # a folder alone has no place in commits.txt
    assert new.published_at == (START + timedelta(days=7 * 13)).replace(tzinfo=UTC)
    change = CellChange.objects.get(benchmark__slug="late_kernel", kind=CellChange.STEP)
    assert change.publication.slug == commit(12)
    assert change.published_at == change.publication.published_at


def test_new_regressions_come_first_on_the_page_and_in_the_feed(client, two_new):
    text = text_of(client.get(SOURCE))
    sections = re.findall(r"\b(0{5,6}[0-9a-f]{1,2}) since", text)
    assert sections[0] == commit(12) and sections == sorted(sections, reverse=True)
    first = text.split(f"{commit(12)} since")[1]
    assert first.split("since")[0].strip().startswith(commit(11))
    assert "Regressions (1) Late kernel Liger-Kernel" in first.split("since")[0]
    assert "· published 2026-03-26" in first.split("since")[0]  # publication 12's own date
    entries = _entries(client.get(FEED).content.decode())
    assert entries[0][0].startswith(f"Regression +60 % at {commit(12)}: Late kernel")
    assert entries[0][1] == "2026-03-26T01:00:00+00:00"  # publication 12's own time
    stamps = [stamp for _, stamp in entries]
    assert stamps == sorted(stamps, reverse=True)
    api = client.get("/api/v1/changes/?source=liger-kernel-ci&kind=step").json()["results"]
    assert (api[0]["benchmark"], api[0]["publication"]) == ("late_kernel", commit(12))
    assert api[0]["published_at"] == "2026-03-26T01:00:00Z"
    times = [c["published_at"] for c in api]
    assert times == sorted(times, reverse=True)


def test_a_redetection_neither_redates_nor_reorders(client, two_new, settings):
    before = client.get(FEED).content.decode()
    api = client.get("/api/v1/changes/?source=liger-kernel-ci").json()["results"]
    changes_detect(source=Source.objects.get(slug="liger-kernel-ci"))
    after = client.get(FEED).content.decode()
    assert _entries(after) == _entries(before) and len(_entries(after)) > 1
    again = client.get("/api/v1/changes/?source=liger-kernel-ci").json()["results"]
    key = ["benchmark", "implementation", "publication", "kind", "published_at"]
    assert [[c[k] for k in key] for c in again] == [[c[k] for k in key] for c in api]


def test_feed_text_reads_in_the_pages_units(client, two_new):
    feed = client.get(FEED).content.decode()
    assert "the median went from 1.000 ms to 1.600 ms between" in feed
    assert not re.search(r"\de[+-]\d", feed)


def test_each_change_links_upstreams_commits_since_the_previous_publication(client, two_new):
    compare = f"https://github.com/linkedin/Liger-Kernel/compare/{commit(11)}...{commit(12)}"
    page = client.get(SOURCE).content.decode()
    assert f'<a href="{compare}" rel="external">upstream commits</a>' in page
    assert f"Upstream's commits: {compare}" in client.get(FEED).content.decode()
    api = client.get(f"/api/v1/changes/?publication={commit(12)}&kind=step").json()["results"]
    assert [c["commits_url"] for c in api] == [compare]


def test_no_commits_link_without_a_repository_or_between_builds_of_one_commit():
    from runs.changes.models import commits_url

    repo = "https://github.com/linkedin/Liger-Kernel"
    assert commits_url(repo, "7644a0f", "7644a0f") == ""  # a release build of the same commit
    assert commits_url("", "a", "b") == "" and commits_url(repo, "", "b") == ""
    assert commits_url("https://example.org/x", "a", "b") == ""
    assert commits_url(repo + "/", "a", "b") == f"{repo}/compare/a...b"


def test_the_migration_dates_the_publications_and_changes_there_are(two_new):
    import importlib

    from django.apps import apps

    fill = importlib.import_module("runs.migrations.0016_change_publication_time").fill
    expected = dict(Publication.objects.values_list("pk", "published_at"))
    Publication.objects.update(published_at=None)
    CellChange.objects.update(published_at=None)
    fill(apps, None)
    assert dict(Publication.objects.values_list("pk", "published_at")) == expected
    assert not CellChange.objects.filter(published_at__isnull=True).exists()
    late = CellChange.objects.get(benchmark__slug="late_kernel", kind=CellChange.STEP)
    assert late.published_at == expected[late.publication_id]


def test_the_benchmark_page_lists_its_changes_newest_publication_first(client, tmp_path, settings):
    """A benchmark's changes: the improvement of the newer publication before the regression
    of an older one (regressions first only within one publication)."""
    settings.PAGE_CACHE_SECONDS = 0
    cells = {
        ("twice", "liger"): [1.0, 1.01, 0.99, 1.0] + [1.6] * 8,  # a regression at 4
        ("twice", "torch"): [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99] + [0.5] * 3,
    }
    write_history(tmp_path, cells)
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])
    steps = CellChange.objects.filter(benchmark__slug="twice", kind=CellChange.STEP)
    assert sorted(steps.values_list("direction", flat=True)) == ["improvement", "regression"]
    text = text_of(client.get("/benchmarks/twice/"))
    listed = text.split("Changes across upstream publications", 1)[1]
    assert listed.index(commit(9)) < listed.index(commit(4)), listed[:600]

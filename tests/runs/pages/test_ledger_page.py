"""Ledger pages name where each file lives upstream (repository, commit, path, a link), never
the path on the machine that imported it, in any entry or error; consecutive unchanged fetches
of the same bytes share one line with their count."""

from __future__ import annotations

import re
import shutil

import pytest

from runs.models import ImportRecord
from runs.pages.views import LEDGER_PAGE
from runs.sources.pipeline import ingest
from tests.conftest import KERNELBENCH, LIGER_CI
from tests.pages import text_of

pytestmark = pytest.mark.django_db


def test_entries_name_the_upstream_file_and_link_it_at_its_commit(client, tmp_path):
    # Imported from a folder whose path says something about this machine.
    local = tmp_path / "home" / "someone" / "kernelbench"
    shutil.copytree(KERNELBENCH, local)
    ingest(source_slug="kernelbench", locations=[str(local)])
    ingest(source_slug="liger-kernel-ci", locations=[str(LIGER_CI / "02bac05")])
    commit = ImportRecord.objects.filter(source__slug="kernelbench").first().upstream_commit
    html = client.get("/sources/kernelbench/ledger/").content.decode()
    assert str(tmp_path) not in html and "someone" not in html
    assert (
        '<a href="https://github.com/ScalingIntelligence/KernelBench/blob/'
        f'{commit}/results/timing/H100_Modal/baseline_time_torch.json" rel="external">'
    ) in html
    html = client.get("/sources/liger-kernel-ci/ledger/").content.decode()
    assert str(LIGER_CI) not in html
    assert (
        "https://github.com/linkedin/Liger-Kernel/blob/gh-pages/benchmarks/02bac05/benchmark.csv"
    ) in html


def test_an_error_names_the_file_not_the_local_path(client, tmp_path):
    """A failed fetch's stored error names the file it read, as ingest errors do."""
    from runs.sources import source_module
    from runs.sources.base import InputFile
    from runs.sources.ledger import ledger_append
    from runs.sources.pipeline import source_ensure

    module = source_module("liger-kernel-bench")
    bad = tmp_path / "private" / "all_benchmark_data.csv"
    ledger_append(
        source=source_ensure(module.SLUG, module.META), publication=None,
        item=InputFile(str(bad), b"", "all_benchmark_data.csv"), report=None, trigger="sync",
        error=f"{bad}: line 2: expected 15 cells, found 3 (see also {tmp_path}/other.csv)",
    )  # fmt: skip
    assert str(tmp_path) in ImportRecord.objects.get().error  # kept whole for the admin
    text = text_of(client.get("/sources/liger-kernel-bench/ledger/"))
    assert str(tmp_path) not in text and "private" not in text
    assert "all_benchmark_data.csv: line 2: expected 15 cells, found 3 (see also other.csv)" in text


def test_unchanged_fetches_of_the_same_bytes_fold_into_one_line(client):
    for _ in range(4):
        ingest(source_slug="kernelbench", locations=[str(KERNELBENCH / "H100_Modal")])
    assert ImportRecord.objects.filter(outcome="unchanged").count() == 6  # 3 of each file
    html = client.get("/sources/kernelbench/ledger/").content.decode()
    # Fetches alternate between the two files: each line folds what repeated in a row.
    lines = html.count('<tr id="entry-')
    assert lines < ImportRecord.objects.count()
    assert "fetches of the same bytes" in text_of(client.get("/sources/kernelbench/ledger/"))


def _failed_fetches(n: int, tmp_path) -> None:
    """n failed fetches of distinct files (errors are never folded), one ledger entry each."""
    from runs.sources import source_module
    from runs.sources.base import InputFile
    from runs.sources.ledger import ledger_append
    from runs.sources.pipeline import source_ensure

    module = source_module("liger-kernel-bench")
    source = source_ensure(module.SLUG, module.META)
    for i in range(n):
        ledger_append(
            source=source, publication=None, report=None, trigger="sync",
            item=InputFile(str(tmp_path / f"f{i:03}.csv"), b"", f"f{i:03}.csv"),
            error=f"fetch {i:03} failed",
        )  # fmt: skip


def test_the_ledger_pages_newest_first_with_the_same_queries_on_every_page(
    client, tmp_path, django_assert_max_num_queries, settings
):
    settings.PAGE_CACHE_SECONDS = 0
    _failed_fetches(230, tmp_path)
    url = "/sources/liger-kernel-bench/ledger/"
    seen, pages = [], 0
    while url:
        with django_assert_max_num_queries(3):
            response = client.get(url)
        text = text_of(response)
        numbers = [int(n) for n in re.findall(r"fetch (\d{3}) failed", text)]
        assert numbers == sorted(numbers, reverse=True) and len(numbers) <= LEDGER_PAGE
        seen += numbers
        pages += 1
        older = re.search(r'href="\?before=(\d+)"', response.content.decode())
        url = f"/sources/liger-kernel-bench/ledger/?before={older.group(1)}" if older else ""
    assert pages == -(-230 // LEDGER_PAGE) and seen == list(range(229, -1, -1))
    assert client.get("/sources/liger-kernel-bench/ledger/?before=x1").status_code == 404

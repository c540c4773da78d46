"""The source, ledger, GPU and group pages render their bulk once per data change and keep it
under the run data's version (runs/pages/data_parts.py): a later reader asks two queries (the
versions and the page's own row) and gets the same bytes, and a write to the run data shows on
the next request."""

from __future__ import annotations

import pytest

from runs.models import Run
from runs.pages.units import scale
from runs.sources.pipeline import ingest
from tests.conftest import KERNELBENCH, LIGER_CSV
from tests.pages import text_of

SOURCE = "/sources/liger-kernel-bench/"
LEDGER = "/sources/liger-kernel-bench/ledger/"
GPU = "/gpus/nvidia-h100-80gb-hbm3/"


@pytest.fixture
def urls(example_run, settings):
    settings.PAGE_CACHE_SECONDS = 0
    return [SOURCE, LEDGER, GPU, example_run.group.get_absolute_url()]


def test_a_later_reader_asks_two_queries_and_gets_the_same_page(
    client, urls, django_assert_num_queries
):
    for url in urls:
        first = client.get(url)
        assert first.status_code == 200, url
        with django_assert_num_queries(2):
            again = client.get(url)
        assert again.content == first.content, url


def test_an_ingest_shows_on_the_next_request(client, urls):
    for url in urls:
        client.get(url)
    assert "The newest 1." in text_of(client.get(SOURCE))
    assert "KernelBench" not in text_of(client.get(GPU))
    # The same file again (one more ledger entry, unchanged) and another source's runs on
    # the same GPU.
    ingest(source_slug="liger-kernel-bench", locations=[str(LIGER_CSV)])
    ingest(source_slug="kernelbench", locations=[str(KERNELBENCH / "H100_Modal")])
    assert "The newest 2." in text_of(client.get(SOURCE))
    assert client.get(LEDGER).content.decode().count('<tr id="entry-') == 2
    assert "KernelBench" in text_of(client.get(GPU))


def test_a_changed_median_shows_on_its_group_page(client, urls, example_run):
    group = example_run.group.get_absolute_url()
    median = example_run.median * 3
    assert scale(median, example_run.unit, " ") not in text_of(client.get(group))
    Run.objects.filter(pk=example_run.pk).update(median=median)
    assert scale(median, example_run.unit, " ") in text_of(client.get(group))

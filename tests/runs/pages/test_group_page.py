"""Comparison group pages: ranked table and bar chart; constant query count."""

from __future__ import annotations

import re

import pytest

from runs.models import Run
from tests.factories import RunFactory
from tests.pages import grow, queries, text_of


def test_example_group_is_ranked_with_a_bar_per_run(client, example_run):
    url = example_run.group.get_absolute_url()
    response = client.get(url + f"?run={example_run.public_id}")
    assert response.status_code == 200
    html = response.content.decode()
    runs = list(Run.objects.public().filter(group=example_run.group).order_by("rank"))
    svg = re.search(r'<svg[^>]*class="chart bar-chart".*?</svg>', html, re.S).group(0)
    assert svg.count('<g class="bar">') == len(runs) == 2
    assert "#1 Liger-Kernel" in svg and "#2 Transformers" in svg
    assert "<title" in svg and "Median latency (µs)" in svg
    text = text_of(response)
    assert "1 Liger-Kernel Liger-Kernel 117.1 µs" in text
    assert "2 Transformers Hugging Face Transformers 385.5 µs" in text
    assert f"/runs/{example_run.public_id}/compare/{runs[0].public_id}/" in html


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["nothex", "0" * 16, "abc"])
def test_bad_or_unknown_group_is_404(client, key):
    assert client.get(f"/groups/{key}/").status_code == 404


@pytest.mark.django_db
def test_group_page_query_count_does_not_grow(client, settings):
    settings.PAGE_CACHE_SECONDS = 0
    run = RunFactory(rank=1)
    RunFactory.create_batch(19, provider="liger")
    url = run.group.get_absolute_url()
    small = queries(client, url)
    grow(400)
    RunFactory.create_batch(30, provider="torch")  # the group itself grows too
    assert queries(client, url) == small


@pytest.mark.django_db
def test_a_prefix_two_groups_share_is_404_not_an_error(client):
    first, second = RunFactory().group, RunFactory(timed_pass="backward").group
    assert first.pk != second.pk
    shared = "ab" * 8
    type(first).objects.filter(pk=first.pk).update(key=f"sha256:{shared}{'0' * 48}")
    type(second).objects.filter(pk=second.pk).update(key=f"sha256:{shared}{'1' * 48}")
    response = client.get(f"/groups/{shared}/")
    assert response.status_code == 404
    assert client.get(f"/groups/{shared}{'1' * 48}/").status_code == 200

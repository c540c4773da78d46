"""Home, source and GPU pages, the Atom feed, health check, 404 page and static files."""

from __future__ import annotations

import pytest
from django.test import override_settings

from tests.pages import text_of


def test_home_says_what_is_here(client, liger_bench):
    response = client.get("/")
    assert response.status_code == 200
    text = text_of(response)
    assert "A public index of GPU-kernel benchmark results with provenance." in text
    assert "2,448 runs in 1,082 comparison groups, from 1 source" in text
    assert "Llama 4 rotary position embedding" in text
    assert "NVIDIA H100 80GB HBM3" in text


def test_source_page_lists_imports_and_license(client, liger_bench):
    response = client.get("/sources/liger-kernel-bench/")
    text = text_of(response)
    assert "license BSD-2-Clause" in text
    assert "2,448 current (2,448 records with 0 later revisions), in 1 publication" in text
    assert "all_benchmark_data.csv" in text and "2,448" in text
    assert "No run of this source has been revised." in text
    assert client.get("/sources/nope/").status_code == 404


def test_gpu_page(client, liger_bench):
    text = text_of(client.get("/gpus/nvidia-h100-80gb-hbm3/"))
    assert "peak memory bandwidth 3,350 GB/s (datasheet)" in text
    assert "peak dense bf16 989.4 TFLOP/s" in text
    assert "Llama 4 rotary position embedding" in text
    assert client.get("/gpus/nope/").status_code == 404


def test_atom_feed_of_new_runs(client, liger_bench):
    response = client.get("/feeds/runs.atom")
    assert response["Content-Type"] == "application/atom+xml; charset=utf-8"
    body = response.content.decode()
    assert body.count("<entry>") == 50
    assert 'xmlns="http://www.w3.org/2005/Atom"' in body and "median on NVIDIA" in body


@pytest.mark.django_db
def test_healthz_touches_no_database(client, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = client.get("/healthz")
    assert response.status_code == 200 and response.content == b"ok\n"
    assert response["Content-Type"] == "text/plain; charset=utf-8"


@pytest.mark.django_db
@override_settings(DEBUG=False)
def test_404_page_helps(client):
    response = client.get("/runs/deadbeef/")
    assert response.status_code == 404
    text = text_of(response)
    assert "No run has the id deadbeef." in text
    assert "/api/v1/runs/lookup/" in text and "Browse all runs" in text


@pytest.mark.django_db
def test_stylesheet_and_script_are_served_without_inline_code(client, example_run_or_factory):
    html = client.get(example_run_or_factory).content.decode()
    assert '<link rel="stylesheet" href="/static/css/site.css">' in html
    assert "<script>" not in html and " style=" not in html
    assert '<script src="/static/js/copy.js" defer></script>' in html


@pytest.fixture
def example_run_or_factory(db):
    from tests.factories import RunFactory

    return RunFactory().get_absolute_url()


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/", "/sources/liger-kernel-bench/", "/runs/?benchmark=rms_norm"])
def test_query_counts_do_not_grow(client, settings, url):
    from tests.factories import RunFactory
    from tests.pages import grow, queries

    settings.PAGE_CACHE_SECONDS = 0
    RunFactory.create_batch(10)
    grow(10)
    small = queries(client, url)
    grow(400)
    assert queries(client, url) == small

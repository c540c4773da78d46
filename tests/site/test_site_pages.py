"""Home, source and GPU pages, the Atom feed, health check, 404 page and static files."""

from __future__ import annotations

import re

import pytest
from django.test import override_settings

from runs.models import Run
from tests.conftest import DATA as REPO_DATA
from tests.pages import text_of


def test_home_says_what_is_here(client, liger_bench):
    response = client.get("/")
    assert response.status_code == 200
    text = text_of(response)
    assert "A public index of GPU-kernel benchmark results with provenance." in text
    assert "2,448 runs in 1,082 comparison groups, from 1 source" in text
    assert "Llama 4 rotary position embedding" in text
    assert "NVIDIA H100 80GB HBM3" in text


def test_home_counts_come_from_the_tallies_and_move_with_an_ingest(client, liger_bench):
    """The counts are kept by the write side (runs/read/tallies.py): no request counts the runs,
    and an import changes them at once (no stale counts)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from runs.sources.pipeline import ingest
    from tests.conftest import KERNELBENCH

    def home(**headers):
        with CaptureQueriesContext(connection) as ctx:
            text = text_of(client.get("/", **headers))
        return text, [q["sql"] for q in ctx.captured_queries if "COUNT(" in q["sql"]]

    text, counted = home()
    assert "2,448 runs in 1,082 comparison groups, from 1 source" in text and counted == []
    text, counted = home(HTTP_AUTHORIZATION="Bearer x")
    assert "2,448 runs" in text and counted == []
    ingest(source_slug="kernelbench", locations=[str(KERNELBENCH)])
    text, counted = home()
    assert "2,948 runs in" in text and "from 2 sources" in text and counted == []
    assert "KernelBench reference timings" in text and "500 runs" in text


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


def test_gpu_and_source_counts_come_once_per_data_change_and_move_with_it(
    client, liger_bench, settings
):
    """Like the home page's, a GPU page's runs per benchmark come from the tallies (no count
    over the runs); a source page's run counts are a scan of its runs, reused until the data
    changes. A change moves both at once."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.PAGE_CACHE_SECONDS = 0

    def page(url):
        with CaptureQueriesContext(connection) as ctx:
            text = text_of(client.get(url))
        # Counts over runs_run (a source's publications are a few hundred rows, counted as asked).
        return text, [
            q["sql"]
            for q in ctx.captured_queries
            if "COUNT(" in q["sql"] and "runs_run" in q["sql"]
        ]

    gpu_url, source_url = "/gpus/nvidia-h100-80gb-hbm3/", "/sources/liger-kernel-bench/"
    before, counted = page(gpu_url)
    assert counted == []
    assert page(gpu_url)[1] == [] and page(source_url)[1]
    assert page(source_url)[1] == []
    rope = Run.objects.filter(
        benchmark__slug="llama4_rope", environment__gpu__slug="nvidia-h100-80gb-hbm3"
    )
    n = rope.count()
    assert f"{n:,}" in before
    Run.objects.filter(pk=rope.first().pk).update(is_current=False)  # no signal: the trigger
    after, counted = page(gpu_url)
    assert counted == [] and f"{n - 1:,}" in after
    assert "2,447 current (2,448 records" in page(source_url)[0]


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
@pytest.mark.parametrize(
    "url",
    [
        "/",
        "/sources/liger-kernel-bench/",
        "/sources/liger-kernel-bench/ledger/",
        "/runs/?benchmark=rms_norm",
        "/feeds/runs.atom",
        "/gpus/nvidia-h100-80gb-hbm3/",
    ],
)
def test_query_counts_do_not_grow(client, settings, url):
    from tests.factories import RunFactory
    from tests.pages import grow, queries

    settings.PAGE_CACHE_SECONDS = 0
    RunFactory.create_batch(10)
    grow(10)
    small = queries(client, url)
    grow(400)
    assert queries(client, url) == small


def test_no_template_comment_spans_lines():
    """Django's {# #} is one line only: a comment that spans lines is printed on the page, as
    one once was on every run page. Multi-line notes use {% comment %}."""
    from tests.conftest import REPO

    offenders = []
    for path in REPO.glob("*/templates/**/*.html"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for start in [m.start() for m in re.finditer(r"\{#", line)]:
                if "#}" not in line[start:]:
                    offenders.append(f"{path.relative_to(REPO)}:{number}")
    assert offenders == []


def test_run_page_shows_no_template_syntax(client, example_run):
    from tests.factories_attestations import AttestationFactory

    AttestationFactory(run=example_run, author=_user("dana"), state="approved")
    text = text_of(client.get(example_run.get_absolute_url()))
    assert "Replications and notes" in text
    for syntax in ("{#", "#}", "{%", "%}", "{{", "}}"):
        assert syntax not in text, syntax


def _user(name):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(name, f"{name}@example.org", "x-password-123")


@pytest.mark.django_db
def test_favicon_for_pages_that_name_none(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/favicon.svg"


@pytest.mark.django_db
def test_admin_names_the_site(client):
    from tests.factories_attestations import login_staff, make_staff

    login_staff(client, make_staff("maintainer"))
    html = client.get("/admin/").content.decode()
    assert "KernelIndex administration" in html and "Django administration" not in html


@pytest.mark.django_db
@override_settings(DEBUG=False)
def test_500_page_is_the_sites_own(rf):
    from django.views.defaults import server_error

    response = server_error(rf.get("/"))
    assert response.status_code == 500
    html = response.content.decode()
    assert "Something went wrong on our side" in html and "/static/css/site.css" in html


def test_source_page_names_the_upstream_file_not_the_local_path(client, liger_bench):
    html = client.get("/sources/liger-kernel-bench/").content.decode()
    assert str(REPO_DATA) not in html and "/work/" not in html
    assert (
        '<a href="https://github.com/linkedin/Liger-Kernel/blob/main/benchmark/data/'
        'all_benchmark_data.csv" rel="external"><code class="wrap">all_benchmark_data.csv</code>'
    ) in html


def test_download_json_is_a_download(client, example_run):
    html = client.get(example_run.get_absolute_url()).content.decode()
    assert f'download="kernelindex-{example_run.public_id}.json">Download JSON</a>' in html


def test_readme_names_the_example_run_and_how_to_change_the_port(example_run, capsys):
    from django.core.management import call_command

    from tests.conftest import REPO

    readme = (REPO / "README.md").read_text()
    assert f"/runs/{example_run.public_id}/" in readme
    assert "manage.py demo 8080" in readme
    with pytest.raises(SystemExit):
        call_command("demo", "--help")
    assert "0.0.0.0:8080" in capsys.readouterr().out

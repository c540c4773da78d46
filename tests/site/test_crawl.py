"""A crawl over the full demo data (both Liger sources, KernelBench, the controlled reruns), as
`manage.py demo` loads it: every benchmark page with every choice link it offers (bounded),
every GPU, source and ledger page, a spread of group pages per source, run pages of every
source and evidence level with their manifests and history, home, browse and the API.

It fails on any answer of 500 or more, on any link that answers 4xx, and on any absolute link
to a host other than the configured origin (or an upstream project's). It reads the demo
database (tests/conftest.py: `demo_db`), built once in a test run and apart from the test
database, so the rest of the suite never sees it. Figures (pages per kind, links followed) are
printed for the record.
"""

from __future__ import annotations

import pytest
from django.test import Client

from tests.conftest import require_services
from tests.crawl import Crawl, crawl_site, per_kind

pytestmark = pytest.mark.services

HOST = "kernelindex.example.org"


@pytest.fixture
def real_services():
    """`services` without the test database: checked before the demo database is built."""
    return require_services()


def test_every_page_kind_over_the_demo_data(real_services, demo_db, settings, capsys):
    from runs.models import Benchmark, Run

    settings.ALLOWED_HOSTS = [HOST]
    settings.SITE_ROOT = f"https://{HOST}"
    settings.SITE_ROOT_CONFIGURED = True
    settings.PAGE_CACHE_SECONDS = 0
    settings.SECURE_SSL_REDIRECT = False
    sources = set(Run.objects.public().values_list("source__slug", flat=True))
    assert sources == {"liger-kernel-bench", "liger-kernel-ci", "kernelbench", "kernelindex"}

    crawl = crawl_site(Crawl(Client(raise_request_exception=False), HOST))
    with capsys.disabled():
        print("\n" + crawl.report())
    kinds = per_kind(crawl)
    assert kinds["benchmark"] == Benchmark.objects.filter(runs__isnull=False).distinct().count()
    assert kinds["benchmark choice"] > kinds["benchmark"]
    assert {k.split(", ")[0] for k in crawl.pages if k.startswith("run (")} == {
        f"run ({s}" for s in sources
    }
    assert crawl.links_followed > 1000
    assert crawl.server_errors == []
    assert crawl.broken_links == []
    assert crawl.foreign_links == []

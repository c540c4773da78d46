"""A crawl over the full demo data (both Liger sources, KernelBench, the controlled reruns), as
`manage.py demo` loads it: every benchmark page with every choice link it offers (bounded),
every GPU, source and ledger page, a spread of group pages per source, run pages of every
source and evidence level with their manifests and history, home, browse and the API.

It fails on any answer of 500 or more, on any link that answers 4xx, and on any absolute link
to a host other than the configured origin (or an upstream project's). The demo data is
loaded once for this module, inside a transaction rolled back at its end, so the rest of the
suite never sees it. Figures (pages per kind, links followed) are printed for the record.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import transaction
from django.test import Client

from tests.conftest import require_services
from tests.crawl import Crawl, crawl_site, per_kind

pytestmark = pytest.mark.services

HOST = "kernelindex.example.org"


@pytest.fixture(scope="module")
def demo_data(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        require_services()
        with transaction.atomic():
            call_command("demo", "--no-serve", stdout=StringIO(), stderr=StringIO())
            yield
            transaction.set_rollback(True)


def test_every_page_kind_over_the_demo_data(demo_data, db, settings, capsys):
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

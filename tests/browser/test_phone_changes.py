"""The source's changes page, the benchmark page's changes and the run page's history on a
390 px phone: the document no wider than the screen, no table of changes wider than its box
(read without scrolling sideways), no visible text under 10 px."""

from __future__ import annotations

import pytest

from runs.models import Run
from runs.sources.pipeline import ingest
from tests.browser.test_phone_pages import _measure
from tests.synthetic_ci import commit, suite_cells, write_history

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDER_THAN_BOX = """() => [...document.querySelectorAll('table.changes')]
  .filter(t => t.getBoundingClientRect().width > 0)
  .map(t => [t.closest('.table-wrap') || t.parentElement, t])
  .filter(([box, t]) => box.scrollWidth > box.clientWidth + 1 || t.scrollWidth > t.clientWidth + 1)
  .map(([box, t]) => `${t.scrollWidth} px in a box of ${box.clientWidth} px`)"""


def test_the_changes_read_on_a_phone(chromium_browser, live_server, tmp_path, settings):
    settings.PAGE_CACHE_SECONDS = 0
    write_history(tmp_path, suite_cells())
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])
    run = Run.objects.public().get(
        benchmark__slug="own_kernel", implementation__provider_key="liger",
        publication__slug=commit(10),
    )  # fmt: skip
    pages = [
        ("changes", "/sources/liger-kernel-ci/changes/"),
        ("benchmark-changes", "/benchmarks/suite_0/"),
        ("run-history", f"/runs/{run.public_id}/"),
    ]
    problems = []
    for name, path in pages:
        problems += _measure(chromium_browser, live_server.url + path, 200, name)
        context = chromium_browser.new_context(viewport={"width": 390, "height": 844})
        page = context.new_page()
        page.goto(live_server.url + path)
        if name != "run-history":
            assert page.locator("table.changes").count() > 0, name
        problems += [f"{name}: a table of changes is {w}" for w in page.evaluate(WIDER_THAN_BOX)]
        context.close()
    assert problems == [], "\n".join(problems)

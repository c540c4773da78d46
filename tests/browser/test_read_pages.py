"""A reader's path through the read side in headless Chromium: the example run page, Compare
with #1, and the benchmark page's plots."""

from __future__ import annotations

import pytest

from runs.models import Run
from tests.conftest import EXAMPLE_EXTERNAL_ID

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def example_id(transactional_db):
    from runs.sources.pipeline import ingest
    from tests.conftest import LIGER_CSV

    ingest(source_slug="liger-kernel-bench", locations=[str(LIGER_CSV)])
    return Run.objects.public().get(external_id=EXAMPLE_EXTERNAL_ID).public_id


def test_run_page_compare_and_benchmark_plots(live_server, browser_page, artifacts, example_id):
    page = browser_page
    page.goto(f"{live_server.url}/runs/{example_id}/")
    assert page.title() == f"Run {example_id} · KernelIndex"
    assert page.locator(".headline .value").inner_text() == "385.5µs"
    # The stylesheet applied: the headline figure is set large.
    size = page.eval_on_selector(".headline .value", "e => getComputedStyle(e).fontSize")
    assert float(size.removesuffix("px")) > 30
    # The manifest is collapsed until asked for.
    assert not page.locator("#manifest-json").is_visible()
    page.locator("details.manifest summary").click()
    assert page.locator("#manifest-json").is_visible()
    assert page.locator("button.copy").is_visible()  # the script ran and offered the copy
    page.screenshot(path=artifacts / "run-page.png", full_page=True)

    page.get_by_role("link", name="Compare with #1 →").click()
    page.wait_for_load_state()
    assert "/compare/" in page.url
    assert "Comparable: both runs are in the same comparison group" in page.inner_text("main")
    assert page.locator("tr.differs").count() >= 4  # rank, medians, implementation, ...
    page.screenshot(path=artifacts / "compare.png", full_page=True)

    page.goto(f"{live_server.url}/benchmarks/llama4_rope/")
    charts = page.locator("figure.panel svg.line-chart")
    assert charts.count() == 1  # one plot at a time, chosen by links
    implementations = set(
        Run.objects.public()
        .filter(benchmark__slug="llama4_rope")
        .values_list("implementation__display_name", flat=True)
    )
    page.get_by_role("link", name="Backward", exact=True).click()
    page.wait_for_load_state()
    assert "pass=backward" in page.url
    assert "backward pass" in page.locator("figure.panel h3").inner_text()
    for i in range(charts.count()):
        chart = charts.nth(i)
        series = chart.locator("g.series")
        names = {series.nth(j).get_attribute("data-series") for j in range(series.count())}
        assert names == implementations, names
        box = chart.bounding_box()
        assert box["width"] > 200 and box["height"] > 100  # laid out, not just in the DOM
        # Every series drew a line with at least two points.
        for j in range(series.count()):
            length = series.nth(j).locator("path").first.evaluate("p => p.getTotalLength()")
            assert length > 10
    page.screenshot(path=artifacts / "benchmark-page.png", full_page=True)
    assert page.errors == []

"""Browse, the benchmark chart and the error pages on a 390 px phone: the document no wider
than the screen, and no visible text under 10 px (SVG text counted at the size it is drawn,
after the chart is scaled to its box). The data includes KernelBench, whose problem names are
the longest options of browse's benchmark select."""

from __future__ import annotations

import pytest

from runs.sources.pipeline import ingest
from tests.browser.conftest import ARTIFACTS
from tests.conftest import KERNELBENCH, LIGER_CSV

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SMALL_TEXT = """() => {
  const out = [], walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walk.nextNode()) {
    const node = walk.currentNode, e = node.parentElement;
    if (!node.textContent.trim() || !e) continue;
    const box = e.getBoundingClientRect(), style = getComputedStyle(e);
    if (!box.width || !box.height || style.visibility === 'hidden') continue;
    let size = parseFloat(style.fontSize);
    const svg = e.closest('svg');
    if (svg && svg.viewBox.baseVal && svg.viewBox.baseVal.width)
      size *= svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    if (size < 10) out.push(size.toFixed(1) + ' px: ' + node.textContent.trim().slice(0, 30));
  }
  return out;
}"""


@pytest.fixture
def phone_site(transactional_db):
    ingest(source_slug="liger-kernel-bench", locations=[str(LIGER_CSV)])
    ingest(source_slug="kernelbench", locations=[str(KERNELBENCH)])


def _measure(browser, url: str, status: int, name: str) -> list[str]:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    response = page.goto(url)
    page.wait_for_load_state("load")
    problems = []
    if response.status != status:
        problems.append(f"answered {response.status}, expected {status}")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    if width > 390:
        problems.append(f"document is {width} px wide")
    problems += [f"text under 10 px: {t}" for t in page.evaluate(SMALL_TEXT)[:5]]
    (ARTIFACTS / "screenshots").mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "screenshots" / f"phone-{name}-390.png"), full_page=True)
    context.close()
    return [f"{name} ({url}): {p}" for p in problems]


@pytest.mark.urls("tests.error_urls")
@pytest.mark.parametrize("debug", [False, True], ids=["production", "debug"])
def test_browse_charts_and_error_pages_read_on_a_phone(
    chromium_browser, live_server, phone_site, settings, debug
):
    settings.DEBUG = debug
    pages = [
        ("home", "/", 200),
        ("browse", "/runs/", 200),
        ("browse-kernelbench", "/runs/?source=kernelbench", 200),
        ("benchmark-line-chart", "/benchmarks/llama4_rope/", 200),
        ("benchmark-speedup", "/benchmarks/llama4_rope/?plot=speedup", 200),
        ("benchmark-bars", "/benchmarks/kernelbench-l3-50-reluselfattention/", 200),
        ("not-found", "/no/such/page/", 404),
        ("run-not-found", "/runs/deadbeef/", 404),
        ("server-error", "/fails/", 500),
        ("forbidden", "/forbidden/", 403),
    ]
    problems = []
    for name, path, status in pages:
        problems += _measure(chromium_browser, live_server.url + path, status, name)
    assert problems == [], "\n".join(problems)

"""Headless Chromium for the browser tests: Debian's chromium driven by Playwright.

Without /usr/bin/chromium the tests skip and say why, unless KERNELINDEX_REQUIRE_BROWSER=1
(CI), where a missing browser is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = Path(os.getenv("KERNELINDEX_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="session")
def chromium_browser():
    problem = None
    if not CHROMIUM.exists():
        problem = f"needs Chromium at {CHROMIUM} (apt-get install chromium)"
    else:
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            problem = "needs the playwright package (pip install -e '.[test]')"
    if problem:
        if os.getenv("KERNELINDEX_REQUIRE_BROWSER") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    # Playwright's sync API runs its own event loop; Django refuses ORM calls from a thread
    # with a running loop unless told this is deliberate (the ORM runs in the test thread).
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=str(CHROMIUM),
                args=["--no-sandbox", "--disable-background-networking"],
            )
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def browser_page(chromium_browser):
    """A fresh page that records console errors and uncaught exceptions."""
    context = chromium_browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.errors = []
    page.on("console", lambda msg: msg.type == "error" and page.errors.append(msg.text))
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    yield page
    context.close()


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture
def chromium_browser(monkeypatch):
    """Headless Chromium through Playwright. Skips without /usr/bin/chromium, unless
    KERNELINDEX_REQUIRE_BROWSER=1 says it must be there (CI), where it fails."""
    if not CHROMIUM.exists():
        message = f"needs Chromium at {CHROMIUM} (apt-get install chromium)"
        if os.getenv("KERNELINDEX_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are
    # still plain synchronous code.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-background-networking"],
        )
        try:
            yield browser
        finally:
            browser.close()

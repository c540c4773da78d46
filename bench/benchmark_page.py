"""Measure a benchmark page as a reader gets it: height at 1280 px, plots, bytes, server time.

    python bench/benchmark_page.py http://127.0.0.1:8000/benchmarks/llama4_rope/ [QUERY...]

Serve the site first (`manage.py demo`, with PAGE_CACHE_SECONDS=0 to time uncached answers).
Prints, for the page and each extra query string: the document height in Chromium at
1280 x 900, the number of SVG plots, the HTML size, and the median of 9 server answers.
"""

from __future__ import annotations

import statistics
import sys
import time
import urllib.request

from playwright.sync_api import sync_playwright


def server_seconds(url: str, n: int = 9) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(n):
        t0 = time.perf_counter()
        with urllib.request.urlopen(url, timeout=30) as response:
            size = len(response.read())
        times.append(time.perf_counter() - t0)
    return statistics.median(times), size


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    base, queries = argv[1], [""] + argv[2:]
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--no-sandbox", "--disable-background-networking"],
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        for query in queries:
            url = base + query
            page.goto(url)
            height = page.evaluate("() => document.documentElement.scrollHeight")
            plots = page.locator("svg.chart").count()
            seconds, size = server_seconds(url)
            print(f"{url}\n  height {height:,} px, {plots} plot(s), {size:,} bytes, "
                  f"server {seconds * 1000:.0f} ms (median of 9)")  # fmt: skip
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

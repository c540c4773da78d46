"""The uncached home page in-process: its time and queries per request, and what recomputing
its counts after a data change costs.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/kernelindex .venv/bin/python bench/home.py

Reads the database as it is. The page cache is off (PAGE_CACHE_SECONDS=0), so every request
renders the page; BENCH_REQUESTS (default 15) requests after one warm-up.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
os.environ["PAGE_CACHE_SECONDS"] = "0"
REQUESTS = int(os.getenv("BENCH_REQUESTS", "15"))


def main() -> None:
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from runs.models import Run
    from runs.read import counts

    settings.ALLOWED_HOSTS = ["*"]
    client = Client()
    client.get("/")
    times, queries = [], set()
    for _ in range(REQUESTS):
        start = time.perf_counter()
        with CaptureQueriesContext(connection) as ctx:
            assert client.get("/").status_code == 200
        times.append((time.perf_counter() - start) * 1000)
        queries.add(len(ctx))
    recompute = []
    for _ in range(3):
        start = time.perf_counter()
        counts._home()
        recompute.append((time.perf_counter() - start) * 1000)
    print(f"{Run.objects.public().count():,} current runs")
    print(
        f"home, uncached: p50 {statistics.median(times):.1f} ms, max {max(times):.1f} ms, "
        f"queries per request {sorted(queries)}; counts after a data change: "
        f"{statistics.median(recompute):.0f} ms (median of 3)"
    )


if __name__ == "__main__":
    main()

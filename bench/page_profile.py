"""Where an uncached page's time goes, in-process.

Requests a page (by default the example run's) with the page cache off through Django's test
client against the database DATABASE_URL names (load it first: `manage.py demo --no-serve`),
and prints the mean time per request, its queries, the share spent in template rendering, and
cProfile's top entries by cumulative time.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ki_demo python bench/page_profile.py \
        [--url /runs/8827e3bb/] [--requests 200] [--top 25] [--sort tottime]

The figures are of the requests after a first one, which is what every reader but the first
after a data change gets of the values kept under the data's version (runs.read.freshness.cached).
`--cold` measures that first reader instead: every key is new before each request.
`--random` asks for the page of a different run each request, drawn at random from the whole
index (readers arriving from links), instead of --url.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
os.environ["PAGE_CACHE_SECONDS"] = "0"
os.environ.setdefault("ALLOWED_HOSTS", "testserver")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.template import Template  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from runs.read import freshness  # noqa: E402

# Random pages whose queries are counted (--random), before the timed requests.
QUERY_SAMPLE = 50


def _random_urls(n: int) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT public_id FROM runs_run WHERE is_current ORDER BY random() LIMIT %s", [n]
        )
        return [f"/runs/{row[0]}/" for row in cursor.fetchall()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="/runs/8827e3bb/")
    parser.add_argument(
        "--cold", action="store_true", help="move the data version before each request"
    )
    parser.add_argument(
        "--random", action="store_true", help="a different random run's page each request"
    )
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument(
        "--sort",
        default="cumulative",
        choices=("cumulative", "tottime"),
        help="cProfile's order: time under each function, or in its own code only",
    )
    args = parser.parse_args()
    # No setup_test_environment(): its instrumented render copies every template's context
    # and sends a signal per template, which a served page never pays.
    client = Client()
    url = args.url
    urls = iter(_random_urls(3 * args.requests + QUERY_SAMPLE + 1)) if args.random else None

    def get():
        if args.cold:
            freshness.reset()
        return client.get(next(urls) if urls else url)

    first = get()
    if first.status_code != 200:
        sys.exit(f"{url} answered {first.status_code}: load the demo data first.")

    # One page's queries; for --random the mean of several pages, whose runs differ in what
    # they ask (a leader, a long history, changes, panels).
    counts, sql_seconds = [], 0.0
    for _ in range(min(QUERY_SAMPLE, args.requests) if args.random else 1):
        with CaptureQueriesContext(connection) as ctx:
            get()
        counts.append(len(ctx.captured_queries))
        sql_seconds += sum(float(q["time"]) for q in ctx.captured_queries)
    queries = sum(counts) / len(counts)
    sql_seconds /= len(counts)

    # Template rendering, timed by wrapping Template.render (nested renders counted once).
    render_seconds = 0.0
    depth = 0
    original = Template.render

    def timed(self, context):
        nonlocal render_seconds, depth
        depth += 1
        start = time.perf_counter()
        try:
            return original(self, context)
        finally:
            depth -= 1
            if depth == 0:
                render_seconds += time.perf_counter() - start

    Template.render = timed
    start = time.perf_counter()
    for _ in range(args.requests):
        get()
    total = time.perf_counter() - start
    Template.render = original

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.requests):
        get()
    profiler.disable()

    per = total / args.requests
    kind = "cold (data version moved before each)" if args.cold else "warm"
    shown = "a random run's page" if args.random else url
    print(f"{shown}, page cache off, {args.requests} {kind} requests, {connection.vendor}")
    print(f"  {per * 1000:.2f} ms a request, {len(first.content):,} bytes")
    print(
        f"  {queries:.4g} queries{f' (mean of {len(counts)} pages)' if len(counts) > 1 else ''}, "
        f"{sql_seconds * 1000:.2f} ms in SQL (as the driver timed them)"
    )
    print(
        f"  template rendering {render_seconds / args.requests * 1000:.2f} ms "
        f"({render_seconds / total:.0%} of the request)"
    )
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats(args.sort).print_stats(args.top)
    print(out.getvalue())


if __name__ == "__main__":
    main()

"""What each layer of the read side's staleness rule buys, page by page, in process.

The rule (runs/read/freshness.py): a trigger moves a version on every write; a page, and each
value kept for a page, is keyed by the versions it reads. Its layers, each of which a page can
do without and stay correct:

    page cache     anonymous GETs answered from the stored page (runs/read/page_cache.py)
    kept values    the costly parts of a page kept under the versions (freshness.cached,
                   cached_many), in the shared cache and each process's copy of it
    process copy   the copy of kept values in each process (runs/read/store.py), which spares
                   the round trip to the shared cache
    tallies        the home and GPU pages' counts kept by triggers (runs/read/tallies.py), instead
                   of counting the runs

For each page this times requests through Django's test client against DATABASE_URL (a
database built by `bench/scale.py --build-only`; REDIS_URL set, so the shared cache is Redis
as deployed) in four modes, in turns: every layer on (a page cache hit); page cache off; page
cache and process copy off (every kept value from Redis); page cache and kept values off
(every part computed). Then it times the tallies' read against the count it replaces.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ki_scale_1m REDIS_URL=redis://127.0.0.1:6379/13 \
        .venv/bin/python bench/layers.py [--requests 40] [--rounds 3]

Prints ms a request (median of the rounds) and each mode's ratio to the one above it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
if __name__ == "__main__":  # not when a test imports it: the environment is the suite's
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    os.environ.setdefault("SECURE_SSL_REDIRECT", "0")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

from runs.read import freshness, store  # noqa: E402

PAGES = [
    "run page",
    "home",
    "browse, 2 filters",
    "benchmark page",
    "group page",
    "API list",
    "changes page",
    "claims page",
]
MODES = ("every layer", "no page cache", "no process copy", "nothing kept")


@contextmanager
def mode(name: str):
    """The layers of `name` turned off for the requests inside."""
    page_cache = settings.PAGE_CACHE_SECONDS
    largest = store.LARGEST
    cached, cached_many = freshness.cached, freshness.cached_many
    if name != "every layer":
        settings.PAGE_CACHE_SECONDS = 0
    if name == "no process copy":
        store.LARGEST = -1  # no entry is copied in: each get goes to the shared cache
        store.clear_copy()
    if name == "nothing kept":
        # The callers imported cached by name: patch it in every module that holds it.
        freshness.cached = lambda name, scopes, compute, **kw: compute()
        freshness.cached_many = lambda kind, ids, scopes, build: build(list(ids))
        _swap(cached, freshness.cached, cached_many, freshness.cached_many)
    try:
        yield
    finally:
        settings.PAGE_CACHE_SECONDS = page_cache
        store.LARGEST = largest
        if name == "nothing kept":
            _swap(freshness.cached, cached, freshness.cached_many, cached_many)
            freshness.cached, freshness.cached_many = cached, cached_many


def _swap(old_one, new_one, old_many, new_many) -> None:
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", {})
        if names.get("cached") is old_one:
            module.cached = new_one
        if names.get("cached_many") is old_many:
            module.cached_many = new_many


def per_request(client: Client, url: str, requests: int) -> float:
    """ms a request, after one request that fills what the mode keeps."""
    response = client.get(url)
    if response.status_code != 200:
        raise RuntimeError(f"{url}: {response.status_code}")
    start = time.perf_counter()
    for _ in range(requests):
        client.get(url)
    return (time.perf_counter() - start) * 1000 / requests


def tallies(rounds: int) -> tuple[float, float]:
    """ms to read the home page's counts from the tallies, and to count them from the runs."""
    read = "SELECT sum(runs), sum(groups) FROM runs_tally"
    count = (
        "SELECT (SELECT count(*) FROM runs_run WHERE is_current), "
        "(SELECT count(*) FROM runs_comparisongroup)"
    )
    times = {read: [], count: []}
    with connection.cursor() as cursor:
        for _ in range(rounds):
            for sql in times:
                start = time.perf_counter()
                cursor.execute(sql)
                cursor.fetchall()
                times[sql].append((time.perf_counter() - start) * 1000)
    return statistics.median(times[read]), statistics.median(times[count])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    # No setup_test_environment(): its instrumented render copies every template's context
    # and sends a signal per template, which a served page never pays.
    from bench.scale import pick_pages

    urls = dict(pick_pages())
    client = Client()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM runs_run")
        (runs,) = cursor.fetchone()
    print(f"{runs:,} runs; {connection.vendor}; cache {settings.CACHES['default']['BACKEND']}")
    print(f"ms a request, median of {args.rounds} rounds of {args.requests}; ratio to the left")
    print("| page | " + " | ".join(MODES) + " |")
    print("|---|" + "---:|" * len(MODES))
    for label in PAGES:
        url = urls[label][0]
        times = {m: [] for m in MODES}
        for _ in range(args.rounds):
            for m in MODES:
                freshness.reset()  # each mode starts from nothing kept
                with mode(m):
                    times[m].append(per_request(client, url, args.requests))
        medians = [statistics.median(times[m]) for m in MODES]
        cells = [f"{medians[0]:.2f}"] + [
            f"{ms:.2f} ({ms / before:.1f}x)"
            for before, ms in zip(medians, medians[1:], strict=False)
        ]
        print(f"| {label} | " + " | ".join(cells) + " |")
    read, count = tallies(max(args.rounds, 5))
    print(
        f"\ntallies: the home page's counts read {read:.2f} ms; counted from the runs {count:.1f} ms"
    )


if __name__ == "__main__":
    main()

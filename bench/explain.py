"""EXPLAIN (ANALYZE, BUFFERS) of every query the browse page and the API list issue.

    DATABASE_URL=postgres://.../db python bench/explain.py [--brief]

Needs a populated PostgreSQL database (`manage.py demo --no-serve` loads about 80,000 runs).
The queries are the ones the views run: the browse query is built by runs.read.browse.browse()
(what runs.pages.views.run_list calls) and the API list by the RunList view's own filter and
cursor pagination, each executed once under a query log, then each logged statement is
explained. Cases: browse unfiltered, with two filters, two filters sorted by median, searched
(q=rope), the second page of the unfiltered list through its cursor, and the API list; then
what browse keeps under the run data's version (the capped count of a combination of filters,
and the catalogue ids a search text matches), which a warm request does not issue; and every
query of a random run's page.
`--brief` prints one line per query (planning + execution ms, and the scans of runs_run).

bench/scale.py calls explain_all(stdout) and cases().
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
os.environ.setdefault("ALLOWED_HOSTS", "testserver")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.http import QueryDict  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, override_settings  # noqa: E402
from rest_framework.test import APIRequestFactory  # noqa: E402

from runs.api.views import RunList  # noqa: E402
from runs.read.browse import browse  # noqa: E402
from runs.read.filters import _search_ids  # noqa: E402

TWO_FILTERS = "benchmark=llama4_rope&gpu=nvidia-h100-80gb-hbm3"


def _browse(query: str) -> Callable[[], object]:
    return lambda: browse(QueryDict(query)).page()


def _count(query: str) -> Callable[[], object]:
    return lambda: browse(QueryDict(query)).count_queryset().count()


def _second_page(query: str) -> Callable[[], object]:
    first = browse(QueryDict(query)).page()
    if first.next is None:
        raise SystemExit(f"/runs/?{query} has a single page: load more runs first")
    return _browse(f"{query}&cursor={first.next.encode()}".lstrip("&"))


def _api_list(query: str) -> Callable[[], object]:
    def run() -> object:
        view = RunList()
        view.args, view.kwargs, view.format_kwarg = (), {}, None
        view.request = view.initialize_request(APIRequestFactory().get("/api/v1/runs/?" + query))
        return view.page_keys()

    return run


def _random_run_page() -> Callable[[], object]:
    """The page of a different run, drawn at random from the whole index, on each call: every
    query a reader arriving from a link costs, page cache off."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT public_id FROM runs_run WHERE is_current ORDER BY random() LIMIT 4")
        ids = iter([row[0] for row in cursor.fetchall()])
    client = Client()

    def run() -> object:
        with override_settings(PAGE_CACHE_SECONDS=0):
            return client.get(f"/runs/{next(ids)}/")

    return run


def cases() -> list[tuple[str, Callable[[], object]]]:
    """(label, a call that issues the view's queries), for every case this script explains."""
    return [
        ("browse /runs/", _browse("")),
        (f"browse /runs/?{TWO_FILTERS}", _browse(TWO_FILTERS)),
        (f"browse /runs/?{TWO_FILTERS}&ordering=median", _browse(f"{TWO_FILTERS}&ordering=median")),
        ("browse /runs/?q=rope", _browse("q=rope")),
        ("browse /runs/?cursor=<page 2>", _second_page("")),
        # Once per data change for each combination of filters, and for each text searched.
        (f"browse count, {TWO_FILTERS}", _count(TWO_FILTERS)),
        ("browse count, q=rope", _count("q=rope")),
        ("browse count, no filter", _count("")),
        ("search q=rope: the catalogue ids", lambda: _search_ids("rope")),
        ("API /api/v1/runs/", _api_list("")),
        ("API /api/v1/runs/?ordering=-median", _api_list("ordering=-median")),
        ("run page, a random run (another for the warm-up call)", _random_run_page()),
    ]


def _plan(sql: str) -> tuple[list[str], dict]:
    # The logged SQL has its values inlined (as the client sent it), so it runs as it is.
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
        text = [row[0] for row in cursor.fetchall()]
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
        raw = cursor.fetchone()[0]
    data = json.loads(raw) if isinstance(raw, str) else raw
    return text, data[0]


def _run_run_scans(plan: dict) -> list[str]:
    found, stack = [], [plan["Plan"]]
    while stack:
        node = stack.pop()
        if node.get("Relation Name") == "runs_run" or node.get("Index Name", "").startswith(
            ("run_", "runs_run")
        ):
            found.append(
                node["Node Type"] + (f" {node['Index Name']}" if "Index Name" in node else "")
            )
        stack.extend(node.get("Plans", []))
    return found


def explain_all(stdout: TextIO, *, brief: bool = False) -> None:
    """Print the plans (or, brief, one line per query) of every case to stdout."""
    if connection.vendor != "postgresql":
        raise SystemExit("bench/explain.py needs PostgreSQL (set DATABASE_URL)")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), count(*) FILTER (WHERE is_current) FROM runs_run")
        total, current = cursor.fetchone()
    stdout.write(f"runs_run: {total:,} rows, {current:,} current\n")
    for label, call in cases():
        call()  # warm: the connection, and the values kept under the data's version
        with CaptureQueriesContext(connection) as log:
            call()
        stdout.write(f"\n== {label}: {len(log)} queries\n")
        for query in log.captured_queries:
            sql = query["sql"]
            text, data = _plan(sql)
            ms = data["Planning Time"] + data["Execution Time"]
            if brief:
                scans = ", ".join(_run_run_scans(data)) or "-"
                stdout.write(f"  {ms:8.2f} ms  {sql[:70]}...  [{scans}]\n")
            else:
                stdout.write(f"-- {ms:.2f} ms: {sql}\n")
                stdout.write("\n".join(text) + "\n")


if __name__ == "__main__":
    explain_all(sys.stdout, brief="--brief" in sys.argv[1:])

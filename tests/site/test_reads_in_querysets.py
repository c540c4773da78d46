"""Reads are QuerySet methods: the modules below build no query inline.

A view or panel names what it reads (`Run.objects.public().revisions_of(source)`), and the
QuerySet says how; a filter written in a view is a read that no other caller can share and
no index review finds.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Every module of runs/pages/ (the page views, the parts they keep, the run page's sections,
# the listings, the feeds), the changes page and feeds, every app's run-page panels and the
# community's page views.
MODULES = sorted(str(p.relative_to(REPO)) for p in (REPO / "runs/pages").glob("*.py")) + [
    "runs/changes/views.py",
    "runs/changes/feeds.py",
    "reruns/panels.py",
    "attestations/panels.py",
    "attestations/watching/panels.py",
    "attestations/views.py",
]
BUILDERS = {
    "filter",
    "exclude",
    "values",
    "values_list",
    "annotate",
    "aggregate",
    "order_by",
    "select_related",
    "prefetch_related",
    "defer",
    "only",
    "distinct",
    "extra",
    "raw",
}


def _inline_queries(source: str) -> list[str]:
    """`Model.objects....builder(...)` chains: a query built where it is read."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in BUILDERS:
            continue
        receiver = node.func.value
        while isinstance(receiver, ast.Call | ast.Attribute | ast.Subscript):
            if isinstance(receiver, ast.Attribute) and receiver.attr == "objects":
                found.append(f"line {node.lineno}: {ast.unparse(node)[:80]}")
                break
            receiver = receiver.func if isinstance(receiver, ast.Call) else receiver.value
    return found


def test_the_scan_finds_an_inline_query():
    sample = "runs = list(Run.objects.public().filter(group=g).ranked())\nRun.objects.ranked()"
    assert _inline_queries(sample) == [
        "line 1: Run.objects.public().filter(group=g)",
    ]


@pytest.mark.parametrize("module", MODULES)
def test_reads_are_queryset_methods(module):
    assert _inline_queries((REPO / module).read_text()) == []

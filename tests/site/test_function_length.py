"""Functions stay under 60 lines (bench/, migrations and tests aside).

KNOWN_LONGER would list longer functions that are known (each may shrink, none may grow);
it is empty, so no function may pass 60 lines. An entry that is split leaves the list.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.source_files import python_files

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 60
SKIP = {".venv", "bench", "migrations", "tests", "node_modules"}
# path:function -> lines now. None is left; an entry may only ever come back with a reason.
KNOWN_LONGER: dict[str, int] = {}


def function_lengths() -> dict[str, int]:
    lengths: dict[str, int] = {}
    for path in python_files(SKIP):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{path.relative_to(ROOT)}:{node.name}"
                lengths[name] = max(lengths.get(name, 0), node.end_lineno - node.lineno + 1)
    return lengths


def test_no_function_passes_the_limit_or_grows():
    lengths = function_lengths()
    over = {name: n for name, n in lengths.items() if n > LIMIT}
    grown_or_new = {n: lines for n, lines in over.items() if lines > KNOWN_LONGER.get(n, LIMIT)}
    assert grown_or_new == {}


def test_the_known_list_is_not_stale():
    """An entry that was split (or renamed) leaves the list, so it cannot grow back unseen."""
    lengths = function_lengths()
    assert {name for name in KNOWN_LONGER if lengths.get(name, 0) <= LIMIT} == set()

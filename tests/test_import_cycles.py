"""No import circles among the project's modules, except the Celery pattern (a services module
whose writes enqueue tasks, and the tasks module that calls the services back).

Imports under `if TYPE_CHECKING:` count: a circle hidden from the interpreter is still one
for the reader. Imports inside functions do not (AppConfig.ready() registers that way, once
the registry is ready).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kernelindex", "runs", "reruns", "attestations", "kirunner")
ALLOWED = [
    {"attestations.watching.services", "attestations.watching.tasks"},
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    modules = {
        _module_name(path): path
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in _module_level(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                # `from package import module` needs the module; other names, the package.
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            edges |= {t for t in targets if t in modules and t != name}
        graph[name] = edges
    return graph


def _module_level(tree: ast.Module):
    """Import statements run at import time: top level, and inside top-level if/try blocks."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If | ast.Try):
            stack += [
                *node.body,
                *node.orelse,
                *getattr(node, "handlers", []),
                *getattr(node, "finalbody", []),
            ]
        elif isinstance(node, ast.ExceptHandler):
            stack += node.body


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_scan_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def test_no_import_circles():
    assert [c for c in _cycles(_graph()) if c not in ALLOWED] == []


def test_page_modules_do_not_import_the_template_tags():
    """Tags are built on the page modules (listing, native, units), never the reverse."""
    graph = _graph()
    assert {
        (name, other)
        for name, edges in graph.items()
        if name.startswith("runs.pages")
        for other in edges
        if other.startswith("runs.templatetags")
    } == set()

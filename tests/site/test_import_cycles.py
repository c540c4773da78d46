"""No import circles among the project's modules, counting every import: top level, under
`if TYPE_CHECKING:` and inside functions (tests/import_graph.py). A circle hidden from import
time by a function-level import is still one for the reader, and an import done late so that a
module loads is the circle's symptom, not its cure.
"""

from __future__ import annotations

from tests.import_graph import graph as _graph

# Circles other work in issue 48 (item 4) is removing; each is allowed only while it stays
# within the modules named here. Delete an entry once its circle is gone.
PENDING: list[set[str]] = []


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
    assert [c for c in _cycles(_graph()) if not any(c <= known for known in PENDING)] == []


def test_the_scan_counts_an_import_inside_a_function():
    """reruns.services sends the execute task by name: no import of reruns.tasks anywhere in
    it, not even inside a function, while reruns.tasks imports the services."""
    graph = _graph()
    assert "reruns.services" in graph["reruns.tasks"]
    assert "reruns.tasks" not in graph["reruns.services"]


# Which top-level package may import which (docs/architecture.md, "Import arrows"): the
# project package composes everything; attestations and reruns are built on runs and never
# import each other; the shared library and the runner import none of the others.
APP_ARROWS = {
    "kernelindex": {"kilib", "runs", "attestations", "reruns", "kirunner"},
    "attestations": {"kilib", "runs", "kirunner"},
    "reruns": {"kilib", "runs", "kirunner"},
    "runs": {"kilib", "kirunner"},
    "kilib": set(),
    "kirunner": set(),
}


def test_packages_import_one_way():
    wrong = {
        (name, other)
        for name, edges in _graph().items()
        for other in edges
        if other.split(".")[0] != name.split(".")[0]
        and other.split(".")[0] not in APP_ARROWS[name.split(".")[0]]
    }
    assert wrong == set()


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

"""The project's import graph, read from the source: every import statement anywhere in a
module (top level, under `if TYPE_CHECKING:`, inside a function or a method), since a circle or
a wrong-way arrow a function hides from import time is still one for the reader."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kernelindex", "kilib", "runs", "reruns", "attestations", "kirunner")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(packages=PACKAGES) -> dict[str, Path]:
    return {
        module_name(path): path
        for package in packages
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
    }


def graph(packages=PACKAGES) -> dict[str, set[str]]:
    """module -> the project modules it imports (modules of `packages` only)."""
    known = modules(packages)
    edges_of: dict[str, set[str]] = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
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
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                    for alias in node.names
                ]
            edges |= {t for t in targets if t in known and t != name}
        edges_of[name] = edges
    return edges_of

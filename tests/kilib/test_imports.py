"""The shared library sits below every app: it imports none of them (nor the project package
that composes them, nor the runner), so any app may import it without an arrow back."""

from __future__ import annotations

from tests.import_graph import graph


def test_the_library_imports_no_app():
    arrows = {
        (name, other)
        for name, edges in graph().items()
        if name.split(".")[0] == "kilib"
        for other in edges
        if other.split(".")[0] != "kilib"
    }
    assert arrows == set()


def test_the_scan_sees_an_import_inside_a_function(tmp_path, monkeypatch):
    """The check above counts imports a function makes when it runs, not only the top level."""
    import tests.import_graph as import_graph

    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text("")
    (tmp_path / "lib" / "a.py").write_text("def f():\n    from app import b\n")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "b.py").write_text("")
    monkeypatch.setattr(import_graph, "ROOT", tmp_path)
    assert import_graph.graph(("lib", "app"))["lib.a"] == {"app.b"}

"""A run's first evidence level: `reported` for upstream data, set with the row and nowhere else.

runs.evidence is the only code that moves a level (and gives a controlled run its own,
tests/reruns/test_controlled_door.py); the first level is written with the row, and this holds that no other code writes one through a field mapping ({"evidence": ...}),
which the scan in test_evidence.py (assignments and keyword arguments) does not see.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from runs.models import Evidence, Run
from runs.sources.pipeline import ingest
from tests.conftest import KERNELBENCH

REPO = Path(__file__).resolve().parents[2]


def _evidence_mappings() -> list[tuple[str, str]]:
    """(file, value) of every dict literal in the code base with an "evidence" key."""
    found = []
    for path in REPO.glob("*/**/*.py"):
        if {".venv", "tests", "migrations", "bench"} & set(path.parts):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Dict):
                continue
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "evidence":
                    found.append((str(path.relative_to(REPO)), ast.unparse(value)))
    return found


def test_only_the_pipeline_writes_a_first_level_and_it_is_reported():
    assert _evidence_mappings() == [("runs/sources/pipeline.py", "Evidence.REPORTED")]


@pytest.mark.django_db
def test_an_upstream_import_creates_reported_runs():
    ingest(source_slug="kernelbench", locations=[str(KERNELBENCH / "H100_Modal")])
    levels = set(Run.objects.values_list("evidence", flat=True))
    assert Run.objects.exists() and levels == {Evidence.REPORTED}

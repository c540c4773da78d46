"""The project's own Python files: what git tracks or would track, not what it ignores.

A scan of the checkout with rglob also reads ignored folders a developer keeps beside the code
(a virtual environment, an upstream checkout for the fidelity runs), which the project does not
ship and a clean clone does not have.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def python_files(skip: set[str] = frozenset()) -> list[Path]:
    """Tracked and untracked-but-not-ignored .py files, minus those under a folder named in skip."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "*.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    paths = [REPO / name for name in sorted(set(listed))]
    return [p for p in paths if p.exists() and not skip & set(p.relative_to(REPO).parts)]

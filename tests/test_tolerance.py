"""bench/tolerance.py and the thresholds in runs/evidence.py must agree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from runs.evidence import TOLERANCE

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import tolerance  # noqa: E402


def test_percentile_interpolates_like_numpy():
    values = [0.0, 1.0, 2.0, 3.0, 4.0]
    assert tolerance.percentile(values, 50) == 2.0
    assert tolerance.percentile(values, 90) == 3.6
    assert tolerance.tolerance_from(0.3413) == 0.35
    assert tolerance.tolerance_from(0.0030) == 0.01


def test_thresholds_are_what_the_data_gives():
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "tolerance.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    rules = out.split("rule:", 1)[1]
    for metric, value in TOLERANCE.items():
        assert f"  {metric}: {value * 100:.0f}%" in rules

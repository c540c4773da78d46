"""bench/h200/recheck.py rebuilds a held result's check inputs from its recorded seed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import kirunner

from .jobs import make_job

ROOT = Path(__file__).resolve().parents[2]


def test_recheck_reproduces_a_held_check_to_the_digit(tmp_path):
    job = make_job(
        "sparsemax",
        provider="torch",
        parameters={"B": 2, "T": 8, "V": 1024, "dim": -1, "dtype": "fp32"},
    )
    held = kirunner.run_job(job, force_cpu=True, rep=5.0, seed=99)
    path = tmp_path / "held.json"
    path.write_text(json.dumps(held))

    out = subprocess.run(
        [sys.executable, str(ROOT / "bench/h200/recheck.py"), str(path), "--seeds", "2"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    entries = [json.loads(line) for line in out.splitlines() if line.startswith('{"held"')]
    assert [e["now"]["name"] for e in entries] == ["y", "grad_x"]
    for e in entries:
        # The same inputs, the same implementation: the same figures, not merely close ones.
        assert e["now"]["worstRatio"] == e["held"]["worstRatio"]
        assert e["now"]["maxAbsErr"] == e["held"]["maxAbsErr"]
    assert f"seed {held['payload']['correctness']['seed']}: held passed=True" in out
    assert '{"rowsWhereSupportDiffers": []}' in out
    assert "seed 2: passed=True" in out

"""bench/tolerance.py and the thresholds in runs/evidence.py must agree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from runs.evidence import TOLERANCE

REPO = Path(__file__).resolve().parents[2]
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


def test_per_cell_table_rule_on_a_small_fixture():
    """A steady cell gets the floor, a moving cell its own p95, a rare cell nothing of its own
    (its class answers for it), and the class pools every cell seen in 3+ runs."""
    steady = ("k", "forward", "latency", "liger", "w1", "GPU")
    moving = ("k", "forward", "latency", "liger", "w2", "GPU")
    rare = ("k", "forward", "latency", "liger", "w3", "GPU")
    runs = [f"c{i}" for i in range(15)]
    cells = {
        steady: {r: 100.0 for r in runs},
        moving: {r: 100.0 + 2 * i for i, r in enumerate(runs)},  # up to 12 % off its median
        rare: {"c0": 100.0, "c1": 300.0, "c2": 100.0},
    }
    table = tolerance.tolerance_table(cells)
    key = tolerance.cell_key
    assert table["cells"][key(steady)] == [0.05, 15]  # the floor
    # deviations of 100..128 from the median 114: p95 is 12.3 %, rounded up to 13 %
    assert table["cells"][key(moving)] == [0.13, 15]
    assert key(rare) not in table["cells"]
    assert table["classes"]["k|liger|GPU|latency"][1] == 33  # 15 + 15 + 3 observations


def test_the_committed_table_is_what_the_data_gives():
    import json

    cells = tolerance.cell_medians(REPO / "data" / "liger-ci")
    committed = json.loads((REPO / "data" / "tolerance" / "liger-ci.json").read_text())
    assert committed == json.loads(json.dumps(tolerance.tolerance_table(cells)))

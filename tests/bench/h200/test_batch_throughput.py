"""bench/h200/per_kernel.py's throughput figures come from the committed signed results."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _module():
    spec = importlib.util.spec_from_file_location("per_kernel", REPO / "bench/h200/per_kernel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_processes_are_grouped_by_runner_process_id(tmp_path):
    batch = tmp_path / "b" / "results"
    batch.mkdir(parents=True)
    for i, (process, start, end) in enumerate(
        [
            ("p1", "00:00:00", "00:00:02"),
            ("p1", "00:00:02", "00:01:00"),
            ("p2", "00:05:00", "00:05:30"),
        ]
    ):
        payload = {
            "benchmark": "softmax",
            "runner": {"process": process},
            "startedAt": f"2026-12-01T{start}Z",
            "finishedAt": f"2026-12-01T{end}Z",
            "phasesS": {"check": 0.5 + i},
        }
        (batch / f"{i}.json").write_text(json.dumps({"payload": payload}))
    processes, phases = _module().throughput(tmp_path)
    assert {
        k: (p["jobs"], (p["end"] - p["start"]).total_seconds()) for k, p in processes.items()
    } == {
        "p1": (2, 60.0),
        "p2": (1, 30.0),
    }
    assert phases["softmax"]["check"] == 1.5


def test_the_committed_families_batch_is_one_process():
    processes, _ = _module().throughput(REPO / "data" / "reruns")
    batch = [p for p in processes.values() if p["batch"] == "h200-2026-12-01b"]
    assert len(batch) == 1 and batch[0]["jobs"] == 285

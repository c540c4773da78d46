"""bench/fidelity/script_cells.py on a stand-in for upstream's benchmark/scripts (CUDA's memory
counters faked): it finds the script's memory cells by running its __main__ with
run_benchmarks recording, measures each twice with the script's own function and records the
requested peak beside each reading, and --whole runs the script itself with the same wrapper."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[3]

UTILS = """
import json
from dataclasses import dataclass
from typing import Any, Optional

@dataclass
class SingleBenchmarkRunInput:
    x: Any
    kernel_provider: str
    kernel_operation_mode: Optional[str] = ""
    extra_benchmark_config: Optional[dict] = None

@dataclass
class SingleBenchmarkRunOutput:
    y_20: float
    y_50: float
    y_80: float

class CustomEncoder(json.JSONEncoder):
    def default(self, obj):
        return str(obj)

def _test_memory(func, _iter=10, quantiles=None, return_mode="mean"):
    for _ in range(_iter):
        func()
    return [7.0, 6.0, 8.0]

def run_benchmarks(**kwargs):
    for x in kwargs["x_values"]:
        kwargs["bench_test_fn"](SingleBenchmarkRunInput(x, kwargs["kernel_providers"][0]))
"""

SCRIPT = """
import torch
from utils import SingleBenchmarkRunOutput, _test_memory, run_benchmarks

def bench_speed(cell):
    with open("speed.log", "a") as log:
        log.write(f"{cell.x}\\n")
    return SingleBenchmarkRunOutput(y_20=0.0, y_50=0.0, y_80=0.0)

def bench_memory(cell):
    mid, low, high = _test_memory(lambda: None, quantiles=[0.5, 0.2, 0.8])
    return SingleBenchmarkRunOutput(y_20=low, y_50=mid + cell.x, y_80=high)

if __name__ == "__main__":
    common = {"kernel_name": "fake", "x_name": "T", "x_values": [1, 2],
              "kernel_providers": ["liger", "torch"],
              "extra_benchmark_configs": [{"H": 4, "dtype": torch.bfloat16}]}
    run_benchmarks(bench_test_fn=bench_speed, kernel_operation_modes=["forward"],
                   metric_name="speed", **common)
    run_benchmarks(bench_test_fn=bench_memory, kernel_operation_modes=["full"],
                   metric_name="memory", **common)
"""


@pytest.fixture
def tool(tmp_path, monkeypatch):
    (tmp_path / "utils.py").write_text(UTILS)
    (tmp_path / "benchmark_fake.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.delitem(sys.modules, "utils", raising=False)
    requested = iter(range(1, 10_000))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a: 0)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch._C, "_cuda_clearCublasWorkspaces", lambda: None, raising=False)
    monkeypatch.setattr(
        torch.cuda, "memory_stats", lambda *a: {"requested_bytes.all.peak": next(requested) * 2**20}
    )
    spec = importlib.util.spec_from_file_location(
        "script_cells", REPO / "bench/fidelity/script_cells.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("utils", None)


def test_every_memory_cell_is_read_twice_with_its_requested_peaks(tool, capsys):
    tool.main(["fake"])
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert not (tool_dir := Path.cwd() / "speed.log").exists(), tool_dir  # no speed cell ran
    cells = [(x["x"], x["provider"], x["phase"]) for x in lines]
    assert cells == [(x, p, ph) for x in (1, 2) for p in ("liger", "torch")
                     for ph in ("fresh", "again")]  # fmt: skip
    assert [x["y50"] for x in lines] == [8.0] * 4 + [9.0] * 4  # the script's own figure
    assert lines[0]["config"] == '{"H": 4, "dtype": "torch.bfloat16"}'
    assert lines[0]["x_name"] == "T" and lines[0]["mode"] == "full"
    assert lines[0]["requestedMiB"] == [float(i) for i in range(1, 11)]
    assert lines[1]["requestedMiB"] == [float(i) for i in range(11, 21)]


def test_whole_runs_the_script_itself_and_reports_each_memory_reading(tool, capsys, tmp_path):
    tool.whole("fake")
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert (tmp_path / "speed.log").read_text() == "1\n2\n"  # its speed cells ran first
    assert [x["y"] for x in lines] == [[7.0, 6.0, 8.0]] * 2  # _test_memory's own answer
    assert lines[1]["requestedMiB"] == [float(i) for i in range(11, 21)]

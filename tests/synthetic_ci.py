"""Synthetic Liger CI histories written as upstream lays them out (one folder per CI run with
its benchmark.csv, commits.txt in run order), for the change-detection and watching tests."""

from __future__ import annotations

import csv
import json
from datetime import datetime, timedelta
from pathlib import Path

HEADER = [
    "kernel_name", "kernel_provider", "kernel_operation_mode", "metric_name", "metric_unit",
    "x_name", "x_label", "x_value", "y_value_50", "y_value_20", "y_value_80",
    "extra_benchmark_config_str", "gpu_name", "timestamp", "liger_version",
]  # fmt: skip
START = datetime(2026, 1, 1, 1, 0, 0)


def commit(i: int) -> str:
    return f"{i:07x}"


def write_history(root: Path, cells: dict[tuple[str, str], list[float]], first: int = 0) -> None:
    """cells: (kernel, provider) -> latency medians in ms, one per CI run, oldest first. Runs
    from `first` on are written (earlier folders stay); commits.txt lists them all."""
    n = max(len(v) for v in cells.values())
    for i in range(first, n):
        folder = root / commit(i)
        folder.mkdir(parents=True, exist_ok=True)
        stamp = (START + timedelta(days=7 * i)).strftime("%Y-%m-%d %H:%M:%S")
        with (folder / "benchmark.csv").open("w", newline="") as f:
            out = csv.writer(f)
            out.writerow(HEADER)
            for (kernel, provider), values in cells.items():
                if i >= len(values):
                    continue
                config = json.dumps({"H": 4096, "dtype": "torch.bfloat16"})
                v = values[i]
                out.writerow([kernel, provider, "forward", "speed", "ms", "T", "T", 1024,
                              v, v, v, config, "NVIDIA H100 80GB HBM3", stamp, "0.6.0"])  # fmt: skip
    (root / "commits.txt").write_text("".join(f"{commit(i)}\n" for i in range(n)))


BASE = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01]


def suite_cells() -> dict[tuple[str, str], list[float]]:
    """Twelve cells of four kernels whose host got 60 % slower at CI run 8 and stayed, one
    kernel of its own that regressed at run 9, one outlier at run 9, one noisy cell. Unknown
    kernels take the global latency tolerance (35 %) as the rule's floor, so moves are large."""
    cells = {}
    for k in range(4):
        for p in ("liger", "torch", "huggingface"):
            cells[f"suite_{k}", p] = BASE + [1.6, 1.6, 1.61, 1.59]
    cells["own_kernel", "liger"] = BASE + [1.0, 2.0, 2.0, 2.01]
    cells["own_kernel", "torch"] = BASE + [1.0, 3.0, 1.0, 1.0]
    cells["noisy_kernel", "liger"] = [1.0, 1.9, 0.6, 1.7, 0.5, 1.8, 0.7, 1.6, 1.0, 1.9, 0.6, 1.7]
    return cells

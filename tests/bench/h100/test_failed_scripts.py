"""bench/h100/fidelity.py: a kernel whose upstream script was run and gave no row is not
measured with the reason read from the script's log, not the generic "not run"."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _module():
    spec = importlib.util.spec_from_file_location("h100_fidelity", REPO / "bench/h100/fidelity.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _script(root: Path, call: str, kernel: str, log: str, csv: bool = False) -> None:
    folder = root / call / f"upstream-{kernel}"
    folder.mkdir(parents=True)
    (folder / "upstream.log").write_text(log)
    if csv:
        (folder / "upstream.csv").write_text("kernel_name\n")


def test_an_import_error_and_a_deadline_are_each_said(tmp_path):
    _script(
        tmp_path, "call3", "qwen2vl_mrope",
        "=== benchmark_qwen2vl_mrope.py start\nTraceback (most recent call last):\n"
        "ImportError: cannot import name 'x' from 'y'\n=== benchmark_qwen2vl_mrope.py rc=1\n",
    )  # fmt: skip
    _script(tmp_path, "call4", "embedding", "=== benchmark_embedding.py start 2026-12-06\n")
    _script(tmp_path, "call4", "tvd", "=== benchmark_tvd.py rc=0\n", csv=True)
    failed = _module().failed_scripts(tmp_path, "ab7fe2a")
    assert set(failed) == {"qwen2vl_mrope", "embedding"}
    assert "(call3) and it failed: ImportError: cannot import name 'x'" in failed["qwen2vl_mrope"]
    assert "deadline stopped it" in failed["embedding"]


def test_only_not_measured_rows_of_those_kernels_take_the_reason(tmp_path):
    _script(tmp_path, "call4", "embedding", "=== benchmark_embedding.py start\n")
    rows = [
        {"kernel": "embedding", "status": "not-measured", "reason": "not run"},
        {"kernel": "embedding", "status": "established", "reason": "measured"},
        {"kernel": "tvd", "status": "not-measured", "reason": "not run"},
    ]
    out = _module().with_failed_scripts({"rows": rows}, tmp_path, "ab7fe2a")["rows"]
    assert "benchmark_embedding.py" in out[0]["reason"]
    assert [r["reason"] for r in out[1:]] == ["measured", "not run"]

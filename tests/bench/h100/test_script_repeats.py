"""bench/h100/fidelity.py's script_repeats: upstream's own memory function called twice in a row
on a cell (bench/fidelity/script_cells.py), keyed as the scripts' CSV rows are, and what a
memory row's reason says of it (bench/fidelity/compare.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
KTO = {"T": 512, "H": 1024, "V": 128256, "mode": "forward", "dtype": "torch.bfloat16",
       "bias": True, "beta": 0.1, "ignore_index": 42}  # fmt: skip


def _module(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, REPO / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _line(provider: str, x: int, phase: str, y50: float, requested: float) -> str:
    return json.dumps(
        {
            "kernel": "kto_loss",
            "provider": provider,
            "mode": "full",
            "x_name": "B",
            "x": x,
            "config": json.dumps(KTO),
            "phase": phase,
            "y50": y50,
            "requestedMiB": [requested - 250.0] + [requested] * 9,
        }  # fmt: skip
    )


@pytest.fixture
def fidelity():
    return _module("h100_fidelity", "bench/h100/fidelity.py")


def test_the_spread_and_the_request_of_each_cell_are_read_from_the_tool_lines(tmp_path, fidelity):
    call = tmp_path / "cells" / "call33"
    call.mkdir(parents=True)
    (call / "cells.jsonl").write_text(
        "\n".join([
            "student_logits.shape: torch.Size([1024, 128256])",  # what a script prints
            _line("huggingface", 2, "fresh", 3078.244, 3075.240),
            _line("huggingface", 2, "again", 3077.245, 3075.240),
            _line("liger", 2, "fresh", 2043.992, 2042.483),
            _line("liger", 2, "again", 2043.992, 2042.483),
            _line("liger", 4, "fresh", 2051.0, 2048.491),  # no second call: no spread
            _line("liger", 8, "fresh", 2063.0, 2060.5),
            _line("liger", 8, "again", 2063.0, 2061.5),  # asked for another MiB
        ])
    )  # fmt: skip
    found = fidelity.script_repeats(tmp_path)
    slugs = {key[1]: key for key in found}
    assert set(slugs) == {"huggingface", "liger"} and len(found) == 3
    hf = slugs["huggingface"]
    assert hf[:4] == ("kto_loss", "huggingface", "full", "memory")
    assert "batch2" in hf[4] and "seq512" in hf[4]
    assert found[hf] == pytest.approx((0.999, True))
    by_batch = {key[4].split("-batch")[1].split("-")[0]: v for key, v in found.items()
                if key[1] == "liger"}  # fmt: skip
    assert by_batch == {"2": (0.0, True), "8": (0.0, False)}


def test_a_memory_row_says_what_upstreams_own_repeat_showed(fidelity):
    obs = [
        {"key": ("kto_loss", "huggingface", "full", "memory", w), "runner": r, "script": s,
         "kind": "unclassified", "protocol": "upstream-resident", "call": "call21",
         "date": "2026-12-05", "gpu": "NVIDIA H100 80GB HBM3", "sameHost": False}
        for w, r, s in (("a", 3077.244, 3078.245), ("b", 8347.794, 8348.295))
    ]  # fmt: skip
    moved = fidelity.rows(obs, "ab7fe2a", {obs[0]["key"]: (1.0, True), obs[1]["key"]: (0, True)})
    assert moved[0]["status"] == "not-established"
    assert moved[0]["memory"]["scriptRepeatMiB"] == 1.0
    assert "read up to 1.000 MiB apart over 2 of its cells, asking for the same bytes both " \
        "times on 2" in moved[0]["reason"]  # fmt: skip
    still = fidelity.rows(obs, "ab7fe2a", {obs[0]["key"]: (0.0, True)})
    assert "read the same both times: the difference is not explained" in still[0]["reason"]
    bare = fidelity.rows(obs, "ab7fe2a")
    assert "scriptRepeatMiB" not in bare[0]["memory"] and "upstream's own" not in bare[0]["reason"]

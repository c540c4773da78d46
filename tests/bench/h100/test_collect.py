"""bench/h100/collect.py: a call's results filed into the batch, the first call's result kept,
and jobs measured again after a runner fix (--replace) replacing theirs, each time they are."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _collect(monkeypatch, *argv: str) -> None:
    spec = importlib.util.spec_from_file_location("h100_collect", REPO / "bench/h100/collect.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", ["collect.py", *argv])
    module.main()


def _archive(path: Path, results: dict[str, float]) -> str:
    with tarfile.open(path, "w:gz") as tar:
        for name, median in results.items():
            data = json.dumps({"payload": {"status": "ok", "median": median}}).encode()
            info = tarfile.TarInfo(f"results/{name}.r1.json")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def _median(batch: Path, job: str) -> float:
    return json.loads((batch / "results" / f"{job}.json").read_text())["payload"]["median"]


def test_a_replaced_group_takes_each_new_result_and_keeps_the_calls_it_replaced(
    tmp_path, monkeypatch
):
    batch, jobs = tmp_path / "batch", tmp_path / "jobs"
    for group, job in (("g1", "0001-a"), ("g1", "0002-b"), ("again", "0001-a")):
        (jobs / group).mkdir(parents=True, exist_ok=True)
        (jobs / group / f"{job}.json").write_text(json.dumps({"job": group}))
    common = ["--batch", str(batch), "--jobs", str(jobs), "--scripts", str(tmp_path / "s")]
    first = _archive(tmp_path / "c1.tar.gz", {"0001-a": 1.0, "0002-b": 2.0})
    _collect(monkeypatch, *common, f"call1:{first}")
    # A later archive of the same host carries call1's results again: they stay call1's.
    again = _archive(tmp_path / "c2.tar.gz", {"0001-a": 9.0, "0002-b": 9.0})
    _collect(monkeypatch, *common, f"call2:{again}")
    assert (_median(batch, "0001-a"), _median(batch, "0002-b")) == (1.0, 2.0)
    # Measured again after a fix: only the group's job is replaced, once per collection.
    fixed = _archive(tmp_path / "c3.tar.gz", {"0001-a": 3.0, "0002-b": 9.0})
    later = _archive(tmp_path / "c4.tar.gz", {"0001-a": 8.0})
    _collect(monkeypatch, *common, "--replace", "again", f"call3:{fixed}", f"call4:{later}")
    assert (_median(batch, "0001-a"), _median(batch, "0002-b")) == (3.0, 2.0)
    # And again after a second fix.
    second = _archive(tmp_path / "c5.tar.gz", {"0001-a": 4.0})
    _collect(monkeypatch, *common, "--replace", "again", f"call5:{second}")
    assert _median(batch, "0001-a") == 4.0
    calls = json.loads((batch / "logs" / "result-calls.json").read_text())
    assert calls == {"0001-a.json": "call5", "0002-b.json": "call1"}
    replaced = json.loads((batch / "logs" / "replaced.json").read_text())
    assert replaced == {"0001-a.json": ["call1", "call3"]}
    assert json.loads((batch / "jobs" / "0001-a.json").read_text()) == {"job": "again"}

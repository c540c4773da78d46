"""`python -m kirunner` end to end in subprocesses, signing included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kirunner.sign import verify_result

from .jobs import KERNELS, make_job

REPO = Path(__file__).resolve().parents[2]
KEY_HEX = "5f" * 32
ENV_KEY = {"KERNELINDEX_WORKER_KEY": KEY_HEX, "KERNELINDEX_WORKER_KEY_ID": "test-worker"}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELINDEX_WORKER")}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def _cli(*args: str, env: dict[str, str] | None = None, timeout: int = 300):
    return subprocess.run(
        [sys.executable, "-m", "kirunner", *args],
        cwd=REPO,
        env=env or _env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _write_job(tmp_path: Path, name: str, job: dict) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(job))
    return path


def test_every_kernel_runs_through_the_cli_signed(tmp_path: Path) -> None:
    # One process per kernel, started together: each pays torch's import once.
    procs = {}
    for name in KERNELS:
        job = _write_job(tmp_path, name, make_job(name, pass_="full"))
        out = tmp_path / f"{name}.result.json"
        cmd = [
            sys.executable,
            "-m",
            "kirunner",
            str(job),
            "--out",
            str(out),
            "--sign",
            "--cpu",
            "--rep",
            "5",
        ]
        procs[name] = (
            subprocess.Popen(
                cmd,
                cwd=REPO,
                env=_env(**ENV_KEY),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ),
            out,
        )
    for name, (proc, out) in procs.items():
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{name}: {stdout}\n{stderr[-3000:]}"
        assert stdout.startswith("ok: "), stdout
        doc = json.loads(out.read_text())
        p = doc["payload"]
        assert p["status"] == "ok" and p["correctness"]["passed"] is True
        assert p["device"] == "cpu" and p["measurement"]["timer"] == "cpu_perf_counter"
        assert len(p["measurement"]["samples"]) == p["measurement"]["iterations"]
        assert doc["signature"]["alg"] == "HMAC-SHA256"
        assert doc["signature"]["keyId"] == "test-worker"
        assert verify_result(doc, bytes.fromhex(KEY_HEX))

    # verify subcommand accepts it, and rejects it once tampered with
    target = procs["rms_norm"][1]
    ok = _cli("verify", str(target), env=_env(**ENV_KEY))
    assert ok.returncode == 0 and "signature OK" in ok.stdout
    doc = json.loads(target.read_text())
    doc["payload"]["measurement"]["median"] *= 0.5
    target.write_text(json.dumps(doc))
    bad = _cli("verify", str(target), env=_env(**ENV_KEY))
    assert bad.returncode == 3 and "BAD" in bad.stderr


def test_liger_on_cpu_writes_an_unavailable_result(tmp_path: Path) -> None:
    job = _write_job(tmp_path, "liger", make_job("llama4_rope", provider="liger", pass_="forward"))
    out = tmp_path / "r.json"
    res = _cli(str(job), "--out", str(out), "--cpu")
    assert res.returncode == 1, res.stderr[-2000:]
    p = json.loads(out.read_text())["payload"]
    assert p["status"] == "unavailable"
    assert "CUDA" in p["error"]
    assert p["implementation"] is None and p["measurement"] is None
    assert p["workload"]["requested"]["seq"] == 4096


def test_sign_subcommand_signs_in_place(tmp_path: Path) -> None:
    job = _write_job(tmp_path, "ln", make_job("layer_norm", pass_="forward"))
    out = tmp_path / "r.json"
    assert _cli(str(job), "--out", str(out), "--cpu", "--rep", "2").returncode == 0
    assert json.loads(out.read_text())["signature"] is None
    assert _cli("sign", str(out), env=_env(**ENV_KEY)).returncode == 0
    doc = json.loads(out.read_text())
    assert verify_result(doc, bytes.fromhex(KEY_HEX))
    assert _cli("verify", str(out), env=_env(**ENV_KEY)).returncode == 0
    wrong = _cli(
        "verify",
        str(out),
        env=_env(KERNELINDEX_WORKER_KEY="6a" * 32, KERNELINDEX_WORKER_KEY_ID="test-worker"),
    )
    assert wrong.returncode == 3


def test_sign_without_a_key_refuses_before_running(tmp_path: Path) -> None:
    job = _write_job(tmp_path, "ln", make_job("layer_norm"))
    out = tmp_path / "r.json"
    res = _cli(str(job), "--out", str(out), "--sign", "--cpu")
    assert res.returncode == 3
    assert "KERNELINDEX_WORKER_KEY" in res.stderr
    assert not out.exists()


@pytest.mark.parametrize("content", ["{not json", "[]"])
def test_unreadable_or_invalid_job(tmp_path: Path, content: str) -> None:
    job = tmp_path / "job.json"
    job.write_text(content)
    out = tmp_path / "r.json"
    res = _cli(str(job), "--out", str(out), "--cpu")
    if content == "[]":
        # parseable JSON but not a job: an error result is still written
        assert res.returncode == 1
        assert json.loads(out.read_text())["payload"]["status"] == "invalid"
    else:
        assert res.returncode == 2 and not out.exists()


def test_batch_runs_jobs_in_one_process_and_resumes(tmp_path: Path) -> None:
    jobs = [
        _write_job(tmp_path, f"{n}-{name}", make_job(name, pass_="forward", rep=5))
        for n, name in enumerate(("rms_norm", "swiglu"))
    ]
    out_dir = tmp_path / "results"
    args = ("batch", *map(str, jobs), "--out-dir", str(out_dir), "--suffix", ".r1", "--cpu")
    first = _cli(*args, "--sign", env=_env(**ENV_KEY))
    assert first.returncode == 0, first.stderr
    assert "batch: 2 ok, 0 not ok, 0 kept, 0 skipped" in first.stdout
    for job in jobs:
        result = json.loads((out_dir / f"{job.stem}.r1.json").read_text())
        assert result["payload"]["status"] == "ok"
        assert verify_result(result, bytes.fromhex(KEY_HEX))
    # A second call keeps what is finished and runs nothing again.
    again = _cli(*args, env=_env(**ENV_KEY))
    assert "batch: 0 ok, 0 not ok, 2 kept, 0 skipped" in again.stdout


def test_a_tainting_capture_is_profiled_in_the_next_process(tmp_path):
    """A kernel and pass whose capture tainted one process of a batch are profiled, not
    captured, in the processes after it; other kernels still capture."""
    from kirunner import __main__ as cli
    from kirunner import diagnose

    tainting = {"payload": {"benchmark": "fused_neighborhood_attention", "pass": "backward"}}
    cli._note_taint(tmp_path, tainting, "0136-fna-backward.r1.json")
    refused = cli._refused_captures(tmp_path)
    assert refused == {"fused_neighborhood_attention/backward": "0136-fna-backward.r1.json"}
    try:
        cli._refuse_for({"benchmark": "fused_neighborhood_attention", "pass": "backward"}, refused)
        assert "0136-fna-backward.r1.json" in diagnose._capture_refused
        cli._refuse_for({"benchmark": "fused_neighborhood_attention", "pass": "forward"}, refused)
        assert diagnose._capture_refused is None
    finally:
        diagnose.refuse_capture(None)


def test_run_sh_brings_in_an_earlier_batchs_refusals_and_hands_on_its_own(tmp_path):
    """`run.sh --refused FILE`: a kernel and pass whose capture tainted a process of an
    earlier batch on the host is refused here from the first job, and a refusal this batch
    learnt goes back to FILE, named by batch and job, for the batches after it."""
    batch = tmp_path / "h200-test"
    (batch / "jobs").mkdir(parents=True)
    example = sorted((REPO / "bench/h200/examples").glob("*.json"))[0]
    (batch / "jobs" / example.name).write_text(example.read_text())
    work = tmp_path / "work"
    (work / "results").mkdir(parents=True)
    # As if an earlier process of this batch had been tainted by a rope backward capture.
    (work / "results" / "capture-refused.txt").write_text("rope/backward\t0007-rope.r1.json\n")
    refused = tmp_path / "refused.txt"
    refused.write_text("geglu/backward\th200-earlier/0313-geglu.r1.json\n")
    run = subprocess.run(
        [
            "bash",
            str(REPO / "bench/h200/run.sh"),
            "--dry-run",
            "--repeats",
            "1",
            "--jobs",
            str(batch / "jobs"),
            "--work",
            str(work),
            "--out",
            str(tmp_path / "out"),
            "--refused",
            str(refused),
            "--python",
            sys.executable,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    here = (work / "results" / "capture-refused.txt").read_text().splitlines()
    assert here == [
        "rope/backward\t0007-rope.r1.json",
        "geglu/backward\th200-earlier/0313-geglu.r1.json",
    ]
    assert refused.read_text().splitlines() == [
        "geglu/backward\th200-earlier/0313-geglu.r1.json",
        "rope/backward\th200-test/0007-rope.r1.json",
    ]
    assert (tmp_path / "out" / "results.tar.gz").exists()

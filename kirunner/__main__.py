"""Command line (`kirunner`, or `python -m kirunner`).

    kirunner run JOB.json --out RESULT.json [--cpu] [--rep MS] [--seed N] [--sign]
    kirunner sign RESULT.json [--out SIGNED.json]
    kirunner verify RESULT.json
    kirunner batch JOB.json... --out-dir DIR [--sign] [--suffix .r1] [--budget S]

`run` is the word a person types; `kirunner JOB.json --out ...` (no word) still runs a job,
as GPU workers call it.

`batch` runs many jobs in one process: process start, imports and Triton compilation dominate
a short job, so a batch of hundreds of jobs costs a fraction of one process per job. Each job
still gets its own result file (written as soon as it finishes; a file already there is kept,
so a batch cut short resumes where it stopped).

Exit status: 0 result written and status ok; 1 result written but the job failed,
was unavailable or the implementation was incorrect; 2 usage error or unreadable input;
3 signing/verification failure; `batch` exits 75 when a job left the process unfit for
another (run it again: finished results are kept).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from .sign import SigningError, key_from_env, sign_result, verify_result
from .version import __version__

__all__ = ["main"]

USAGE = f"""\
kirunner {__version__}: re-measure one KernelIndex benchmark run and write a result file.

usage:
  kirunner run JOB.json --out RESULT.json [--cpu] [--rep MS] [--seed N]
  kirunner batch JOB.json... --out-dir DIR [--suffix .r1] [--budget S]
  kirunner sign RESULT.json [--out SIGNED.json]      (KernelIndex's own GPU workers only)
  kirunner verify RESULT.json                         (KernelIndex's own GPU workers only)
  kirunner COMMAND --help                             (the options of one command)

Reproduce a run on your own GPU:
  1. On the run's page, "Reproduce on your GPU": download its job file (job.json).
     It names the benchmark, the implementation and release, the pass, the metric and
     the exact workload parameters of the published row.
  2. Install what the job file's page lists (the page gives the wheel's digest), e.g.
       pip install "kirunner[gpu] @ <site>/reproduce/kirunner-{__version__}-py3-none-any.whl#sha256=<digest>" "liger-kernel==0.6.2"
  3. kirunner run job.json --out result.json
     It checks the implementation against a reference first, then measures the way the
     upstream benchmark script does (triton's do_bench quantiles for latency, the peak
     allocation for memory), then times the GPU alone (cold device time, host enqueue
     time, L2 flush) to say whether the figure was device-bound or host-bound.
  4. Upload result.json on the run's page ("Add a reproduction", or
     POST /api/v1/attestations/ with result_file). It is shown as a measured
     reproduction once a maintainer approves it; it never changes the run's evidence level.

Without a CUDA GPU (or with --cpu) the job runs on the CPU with scaled-down shapes: the
correctness check means something, the timing does not. liger-kernel needs a CUDA GPU.

The result file holds: the job it ran, the workload as requested and as run, the GPU and
driver, the versions of CUDA, torch, triton, transformers and liger-kernel, the correctness
check, every sample, the quantiles, and the diagnostics. No host name, user name or path.

exit status: 0 result written and status ok; 1 result written, but the status is
incorrect, unavailable, invalid or error; 2 usage error or unreadable job file;
3 signing or verification failure.
"""


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    # Write-then-rename: a killed run never leaves half a result file behind.
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, ensure_ascii=False, allow_nan=False)
        fh.write("\n")
    os.replace(tmp, path)


def _read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _progress(step: str) -> None:
    # stderr, so that a caller who pipes stdout gets the summary alone.
    print(f"kirunner: {step}", file=sys.stderr, flush=True)


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kirunner run",
        description="Re-measure one benchmark run: correctness check, then the measurement, "
        "then (on a GPU) the device-time diagnostics. Writes the result document to --out and "
        "prints a summary.",
    )
    p.add_argument("job", help="the job file (JSON), e.g. job.json from a run's page")
    p.add_argument("--out", required=True, help="where to write the result file (JSON)")
    p.add_argument(
        "--sign",
        action="store_true",
        help="sign with KERNELINDEX_WORKER_KEY[_ID] (KernelIndex's GPU workers; never a self-run job)",
    )
    p.add_argument(
        "--cpu", action="store_true", help="run on the CPU (small shapes) even if a GPU is present"
    )
    p.add_argument(
        "--rep", type=float, default=None, help="override the rep budget in ms (recorded)"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed for the random inputs (default: random, recorded)",
    )
    return p


def _signing_key(job: Any) -> tuple[str, bytes] | None:
    """The worker key to sign `job`'s result with, or None (said why on stderr): a self-run
    job is never signed, and a missing key fails before minutes are spent on the run."""
    from .runner import is_self_run

    if is_self_run(job):
        print(
            "kirunner: a self-run job is never signed with a worker key: upload its "
            "result as a measured reproduction",
            file=sys.stderr,
        )
        return None
    try:
        return key_from_env()
    except SigningError as exc:
        print(f"kirunner: {exc}", file=sys.stderr)
        return None


def _cmd_run(argv: list[str]) -> int:
    args = _run_parser().parse_args(argv)
    try:
        job = _read_json(args.job)
    except (OSError, json.JSONDecodeError) as exc:
        print(f"kirunner: cannot read job {args.job}: {exc}", file=sys.stderr)
        return 2

    from .runner import is_self_run, run_job

    key = None
    if args.sign:
        key = _signing_key(job)
        if key is None:
            return 3

    _progress(f"{__version__} running {args.job}")
    result = run_job(job, force_cpu=args.cpu, rep=args.rep, seed=args.seed, progress=_progress)
    if key is not None:
        sign_result(result, *key)
    _write_json(Path(args.out), result)
    if is_self_run(job):
        print(_report(result, args.out))
    else:
        print(_summary(result))
    return 0 if result["payload"].get("status") == "ok" else 1


def _ms(value: Any) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "n/a"
    return f"{value * 1e3:.2f} us" if value < 1 else f"{value:.4g} ms"


def _report(result: dict[str, Any], out: str) -> str:
    """The human summary of a self-run: what a person reads before uploading the file."""
    payload = result["payload"]
    env = payload.get("environment") or {}
    m = payload.get("measurement") or {}
    checked = payload.get("correctness") or {}
    where = env.get("gpuName") or ("the CPU (scaled-down shapes)" if payload["device"] else "-")
    lines = [
        f"{payload.get('benchmark')} · {payload.get('provider')} · {payload.get('pass')} · "
        f"{payload.get('metric')} on {where}: {payload.get('status')}",
    ]
    if checked:
        lines.append(f"  correctness     {'passed' if checked.get('passed') else 'FAILED'}")
    if m:
        unit = m.get("unit")
        figure = (
            f"{_ms(m.get('median'))} (p20 {_ms(m.get('p20'))}, p80 {_ms(m.get('p80'))})"
            if unit == "ms"
            else f"{m.get('median'):.6g} {unit}"
        )
        lines.append(
            f"  figure          median {figure}, {m.get('iterations')} samples, {m.get('timer')}"
        )
        diagnostics = m.get("diagnostics") or {}
        cls = diagnostics.get("classification")
        if cls:
            lines.append(f"  device time     {_ms(cls['deviceMs'])} (cold, L2 flushed)")
            lines.append(f"  classification  {cls['kind']}: {cls.get('why', '')}")
        elif diagnostics.get("absent") or diagnostics.get("error"):
            lines.append(
                f"  device time     none: {diagnostics.get('absent') or diagnostics['error']}"
            )
    if payload.get("error"):
        lines.append(f"  error           {payload['error'].splitlines()[0]}")
    if payload.get("status") == "ok":
        lines.append(f"  result          {out}: upload it on the run's page as a reproduction")
    else:
        lines.append(
            f"  result          {out} (not uploadable: the status is {payload.get('status')})"
        )
    return "\n".join(lines)


def _summary(result: dict[str, Any]) -> str:
    payload = result["payload"]
    m = payload.get("measurement") or {}
    summary = f"{payload.get('status')}: {payload.get('benchmark')}/{payload.get('provider')}/{payload.get('pass')}/{payload.get('metric')}"
    if m:
        summary += f" median={m.get('median'):.6g} {m.get('unit')} (p20={m.get('p20'):.6g}, p80={m.get('p80'):.6g}, n={m.get('iterations')})"
        cls = (m.get("diagnostics") or {}).get("classification")
        if cls:
            summary += (
                f" device={cls['deviceMs']:.6g} host={cls['hostEnqueueMs']:.6g} {cls['kind']}"
            )
    if payload.get("error"):
        summary += f" error={payload['error'].splitlines()[0]}"
    return summary


TAINTED = 75  # EX_TEMPFAIL: run the batch again in a new process; finished results are kept


def _finished(path: Path) -> bool:
    """A result worth keeping: anything but a crash (which a second try may get past)."""
    try:
        return _read_json(str(path))["payload"]["status"] != "error"
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _release() -> None:
    """Free what a job left behind before the next one starts (see runner._run)."""
    import gc

    gc.collect()
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


REFUSED_FILE = "capture-refused.txt"


def _refused_captures(out_dir: Path) -> dict[str, str]:
    """Kernel/pass keys whose capture tainted an earlier process, with the job that did: this
    batch's own, or another batch's on the same host that `run.sh --refused` brought in."""
    path = out_dir / REFUSED_FILE
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    return dict(line.split("\t", 1) for line in lines if "\t" in line)


def _capture_key(doc: dict[str, Any]) -> str:
    return f"{doc.get('benchmark')}/{doc.get('pass')}"


def _refuse_for(job: dict[str, Any], refused: dict[str, str]) -> None:
    from . import diagnose

    by = refused.get(_capture_key(job))
    diagnose.refuse_capture(
        None
        if by is None
        else f"a capture of this kernel and pass failed part-way in {by}, "
        "an earlier process, and tainted it: profiled instead"
    )


def _note_taint(out_dir: Path, result: dict[str, Any], name: str) -> None:
    with (out_dir / REFUSED_FILE).open("a") as f:
        f.write(f"{_capture_key(result['payload'])}\t{name}\n")


def _batch_job(
    job: dict[str, Any], out: Path, args: argparse.Namespace, key: Any, refused: dict[str, str]
) -> dict[str, Any]:
    """Run one job of a batch, sign and write its result, and print its line."""
    import time

    from .runner import run_job

    started = time.monotonic()
    _refuse_for(job, refused)
    result = run_job(job, force_cpu=args.cpu, rep=args.rep)
    _release()
    if key is not None:
        sign_result(result, *key)
    _write_json(out, result)
    start_bytes = result["payload"].get("environment", {}).get("allocatedAtStartBytes")
    at_start = "" if start_bytes is None else f" [allocated at start: {start_bytes} B]"
    print(f"{out.name} {time.monotonic() - started:.1f}s {_summary(result)}{at_start}", flush=True)
    return result


def _cmd_batch(argv: list[str]) -> int:
    import time

    p = argparse.ArgumentParser(prog="python -m kirunner batch")
    p.add_argument("jobs", nargs="+", help="RerunJob JSON files")
    p.add_argument("--out-dir", required=True, help="one RESULT per job: <job stem><suffix>.json")
    p.add_argument("--suffix", default="", help="added to each result's file name, e.g. .r1")
    p.add_argument("--sign", action="store_true", help="sign with KERNELINDEX_WORKER_KEY[_ID]")
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--rep", type=float, default=None)
    p.add_argument("--budget", type=float, default=None, help="start no job after S seconds")
    args = p.parse_args(argv)
    key = None
    if args.sign:
        try:
            key = key_from_env()
        except SigningError as exc:
            print(f"kirunner: {exc}", file=sys.stderr)
            return 3

    t0 = time.monotonic()
    out_dir = Path(args.out_dir)
    counts = {"ok": 0, "not ok": 0, "kept": 0, "skipped": 0}
    refused = _refused_captures(out_dir)
    for job_path in args.jobs:
        out = out_dir / f"{Path(job_path).stem}{args.suffix}.json"
        if out.exists() and _finished(out):
            counts["kept"] += 1
            continue
        if args.budget is not None and time.monotonic() - t0 > args.budget:
            counts["skipped"] += 1
            continue
        try:
            job = _read_json(job_path)
        except (OSError, json.JSONDecodeError) as exc:
            print(f"{job_path}: cannot read: {exc}", flush=True)
            counts["not ok"] += 1
            continue
        result = _batch_job(job, out, args, key, refused)
        ok = result["payload"].get("status") == "ok"
        counts["ok" if ok else "not ok"] += 1
        diagnostics = (result["payload"].get("measurement") or {}).get("diagnostics") or {}
        if (diagnostics.get("device") or {}).get("processTainted"):
            # A CUDA-graph capture failed part-way: this process's allocator and generator
            # cannot be trusted for another job. Exit so the caller starts a fresh one.
            # The kernel and pass are remembered so that the next process profiles them.
            _note_taint(out_dir, result, out.name)
            print(f"batch: process tainted by {out.name}; exiting for a fresh process", flush=True)
            return TAINTED
    print("batch: " + ", ".join(f"{v} {k}" for k, v in counts.items()), flush=True)
    return 0 if counts["not ok"] == 0 else 1


def _cmd_sign(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m kirunner sign")
    p.add_argument("result")
    p.add_argument("--out", default=None, help="default: sign in place")
    args = p.parse_args(argv)
    try:
        key_id, key = key_from_env()
        doc = _read_json(args.result)
        sign_result(doc, key_id, key)
    except (SigningError, OSError, json.JSONDecodeError, ValueError) as exc:
        print(f"kirunner sign: {exc}", file=sys.stderr)
        return 3
    _write_json(Path(args.out or args.result), doc)
    return 0


def _cmd_verify(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m kirunner verify")
    p.add_argument("result")
    args = p.parse_args(argv)
    try:
        key_id, key = key_from_env()
        doc = _read_json(args.result)
    except (SigningError, OSError, json.JSONDecodeError) as exc:
        print(f"kirunner verify: {exc}", file=sys.stderr)
        return 3
    sig = doc.get("signature") or {}
    if sig.get("keyId") != key_id:
        print(
            f"kirunner verify: signed with key {sig.get('keyId')!r}, have {key_id!r}",
            file=sys.stderr,
        )
        return 3
    if not verify_result(doc, key):
        print("kirunner verify: BAD signature", file=sys.stderr)
        return 3
    print("signature OK")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] == "--version":
        print(f"kirunner {__version__}")
        return 0
    if argv and argv[0] == "sign":
        return _cmd_sign(argv[1:])
    if argv and argv[0] == "batch":
        return _cmd_batch(argv[1:])
    if argv and argv[0] == "verify":
        return _cmd_verify(argv[1:])
    if argv and argv[0] == "run":
        argv = argv[1:]
    return _cmd_run(argv)


if __name__ == "__main__":
    sys.exit(main())

"""File a device call's archive (bench/h100/device.sh) into a rerun batch folder.

    python bench/h100/collect.py --batch data/reruns/h100-2026-12-05 --jobs .whl/h100-jobs \
        --scripts bench/fidelity/h100-ab7fe2a call1:/work/.device/1/call1.tar.gz ...

Per call, in the order given (a later call's archive holds the earlier calls' results too,
carried so that a fresh host resumes): the first finished result of each job (`.r1`) goes to
`results/<job>.json`, further processes' (`.r2` ...) to `repeats/<job>.rN.json`; a result is
filed by the first call that returns it, and `logs/result-calls.json` names that call. Results
that did not finish (`unavailable`, `error`) are not kept; the runner logs go to
`logs/<call>-*`, and the scripts' CSVs, logs and nvidia-smi samples to `<scripts>/<call>/`.
Then every job with a result is copied to `jobs/`, every other one to `unrun/`.

`--replace GROUP` (a group folder of --jobs, repeatable): jobs measured again after a runner
fix (issued again with bench/h100/issue_jobs.py --again, same file names). The first result a
call of this collection returns for one of them replaces the one on file, and
`logs/replaced.json` lists, per result, the calls whose results were replaced (git keeps them).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tarfile
import tempfile
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", required=True, type=Path)
    ap.add_argument("--jobs", required=True, type=Path, help="the issued jobs, in group folders")
    ap.add_argument("--scripts", required=True, type=Path)
    ap.add_argument("--replace", action="append", default=[], help="a group measured again")
    ap.add_argument("archives", nargs="+", help="CALL:PATH of each call's tar.gz")
    args = ap.parse_args()
    again = {f"{j.stem}.json" for g in args.replace for j in (args.jobs / g).glob("*.json")}
    replaced_file = args.batch / "logs" / "replaced.json"
    replaced = json.loads(replaced_file.read_text()) if replaced_file.exists() else {}
    replaced = {k: [v] if isinstance(v, str) else v for k, v in replaced.items()}
    replaced_now: set[str] = set()
    batch = args.batch
    for sub in ("results", "repeats", "logs", "jobs", "unrun"):
        (batch / sub).mkdir(parents=True, exist_ok=True)
    calls_file = batch / "logs" / "result-calls.json"
    calls = json.loads(calls_file.read_text()) if calls_file.exists() else {}
    for spec in args.archives:
        call, path = spec.split(":", 1)
        with tempfile.TemporaryDirectory() as tmp:
            with tarfile.open(path) as tar:
                tar.extractall(tmp, filter="data")
            root = Path(tmp)
            for res in sorted((root / "results").glob("*.json")):
                payload = json.loads(res.read_text())["payload"]
                if payload.get("status") not in ("ok", "incorrect"):
                    continue
                m = re.match(r"(.+)\.r(\d+)\.json$", res.name)
                stem, rep = m.group(1), int(m.group(2))
                dest = (
                    batch / "results" / f"{stem}.json"
                    if rep == 1
                    else batch / "repeats" / f"{stem}.r{rep}.json"
                )
                if dest.name in again and dest.name not in replaced_now and dest.name in calls:
                    replaced.setdefault(dest.name, []).append(calls.pop(dest.name))
                    replaced_now.add(dest.name)
                if dest.name in calls:
                    continue
                shutil.copyfile(res, dest)
                calls[dest.name] = call
            refused = root / "results" / "capture-refused.txt"
            if refused.exists():
                shutil.copyfile(refused, batch / "logs" / f"{call}-capture-refused.txt")
            for log in sorted((root / "logs").glob("*")):
                if log.name.startswith(("batch.r", "run-", "call")):
                    name = log.name if log.name.startswith("call") else f"{call}-{log.name}"
                    shutil.copyfile(log, batch / "logs" / name)
            for name in (f"device-{call}.log", "smi.csv", "smi-before.txt", "smi-after.txt"):
                src = root / name
                if src.exists():
                    dest_name = name if name.startswith("device-") else f"{call}-{name}"
                    shutil.copyfile(src, batch / "logs" / dest_name)
            for up in sorted(root.glob("upstream-*")):
                dest = args.scripts / call / up.name
                dest.mkdir(parents=True, exist_ok=True)
                for f in up.glob("*"):
                    shutil.copyfile(f, dest / f.name)
            repro = root / "reproduce"
            if repro.is_dir():
                dest = Path("bench/reproduce-gpu") / call
                dest.mkdir(parents=True, exist_ok=True)
                for f in repro.glob("result-*.json"):
                    shutil.copyfile(f, dest / f.name)
    calls_file.write_text(json.dumps(calls, indent=1, sort_keys=True) + "\n")
    if replaced:
        replaced_file.write_text(json.dumps(replaced, indent=1, sort_keys=True) + "\n")
    ran = {name.removesuffix(".json") for name in calls if not re.search(r"\.r\d+\.json$", name)}
    # A job issued again is filed from its --replace group, whatever other group holds it,
    # once its new result is: until then the result on file answers the job on file.
    for job in sorted(args.jobs.glob("*/*.json"), key=lambda j: (j.parent.name in args.replace, j)):
        if (
            job.name in again
            and job.name not in replaced_now
            and (batch / "jobs" / job.name).exists()
        ):
            continue
        where = "jobs" if job.stem in ran else "unrun"
        other = "unrun" if where == "jobs" else "jobs"
        (batch / other / job.name).unlink(missing_ok=True)
        shutil.copyfile(job, batch / where / job.name)
    print(
        f"{batch}: {len(list((batch / 'results').glob('*.json')))} results, "
        f"{len(list((batch / 'repeats').glob('*.json')))} repeats, "
        f"{len(list((batch / 'jobs').glob('*.json')))} jobs, "
        f"{len(list((batch / 'unrun').glob('*.json')))} unrun"
    )


if __name__ == "__main__":
    main()

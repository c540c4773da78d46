"""Issue again, with a fresh id and nonce, jobs an earlier batch issued (no database needed).

    .venv/bin/python bench/h200/reissue_jobs.py --out data/reruns/h200-2026-12-01/jobs \
        --match 'geglu-*-latency-*' data/reruns/h200-2026-11-30/jobs/*.json ...

A job names the run it re-measures by source, external id and digest; only `job` (id, nonce,
issuedAt) is the server's per-issue part, so a re-issued job is the document `issue_jobs.py`
would write for the same run. `--match` keeps the files whose name (without the leading
number) matches one of the patterns. Files are numbered in the order given.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import secrets
import uuid
from datetime import UTC, datetime
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("jobs", nargs="+", type=Path)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--match", action="append", default=[], help="fnmatch pattern, repeatable")
    p.add_argument("--start", type=int, default=1, help="number of the first file written")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    issued = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    n = args.start
    for path in args.jobs:
        name = re.sub(r"^\d+-", "", path.stem)
        if args.match and not any(fnmatch.fnmatch(name, pat) for pat in args.match):
            continue
        doc = json.loads(path.read_text())
        doc["job"].update(id=str(uuid.uuid4()), nonce=secrets.token_hex(16), issuedAt=issued)
        (args.out / f"{n:03d}-{name}.json").write_text(json.dumps(doc, indent=2) + "\n")
        n += 1
    print(f"wrote {n - args.start} jobs to {args.out}")


if __name__ == "__main__":
    main()

"""How far the versions pushed to a process (runs/read/pushed_versions.py) lag the commit.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ki_scale_80k \\
        .venv/bin/python bench/pushed_versions.py [--writes 500]

Each write commits one move of a scope of its own (`bench:lag`, deleted at the end) from
another connection, then this process waits until its listening thread has the new value:
the time from the commit's return to the copy holding it. Prints the median, p99 and max in
microseconds, and how long a version read from the table takes on the same database, for scale.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
os.environ["KERNELINDEX_PUSHED_VERSIONS"] = "1"

import django  # noqa: E402

django.setup()

import psycopg  # noqa: E402
from django.db import connection  # noqa: E402

from runs.read import freshness, pushed_versions  # noqa: E402

SCOPE = "bench:lag"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=500)
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        sys.exit("needs PostgreSQL (DATABASE_URL)")
    deadline = time.monotonic() + 10
    while pushed_versions.lookup((SCOPE,), freshness._read) is None:
        if time.monotonic() > deadline:
            sys.exit("the listener did not start")
        time.sleep(0.01)
    writer = psycopg.connect(autocommit=True, **pushed_versions.connection_params())
    copy = pushed_versions._copy
    lags = []
    try:
        for _ in range(args.writes):
            value = writer.execute(
                "INSERT INTO runs_version (scope, value, changed_at) VALUES (%s, 1, now()) "
                "ON CONFLICT (scope) DO UPDATE SET value = runs_version.value + 1, "
                "changed_at = now() RETURNING value",
                [SCOPE],
            ).fetchone()[0]
            committed = time.perf_counter()
            while copy.values.get(SCOPE, (0,))[0] != value:
                time.sleep(0)  # yield to the listening thread
            lags.append((time.perf_counter() - committed) * 1e6)
        reads = []
        for _ in range(args.writes):
            started = time.perf_counter()
            freshness._read((SCOPE, "data"))
            reads.append((time.perf_counter() - started) * 1e6)
    finally:
        writer.execute("DELETE FROM runs_version WHERE scope = %s", [SCOPE])
        writer.close()
        pushed_versions.stop()
    lags.sort()
    reads.sort()

    def row(name, xs):
        p99 = xs[min(len(xs) - 1, int(len(xs) * 0.99))]
        return f"| {name} | {len(xs)} | {statistics.median(xs):.0f} | {p99:.0f} | {xs[-1]:.0f} |"

    print("| figure (µs) | n | median | p99 | max |")
    print("|---|---|---|---|---|")
    print(row("commit to the process's copy", lags))
    print(row("a versions read from the table", reads))


if __name__ == "__main__":
    main()

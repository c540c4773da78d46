"""The full bulk export on PostgreSQL: how fast it streams, that memory stays flat, and that
it arrives whole through gunicorn even when it takes longer than the worker timeout.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/kernelindex .venv/bin/python bench/export.py

Reads the database as it is (load it first, e.g. `manage.py ingest liger-kernel-ci
data/liger-ci`). Prints, for CSV and JSON lines: (1) rows/s of the export in this process with
no budget and the peak Python memory it allocated; (2) the same export through gunicorn with
one sync worker and a worker timeout of BENCH_TIMEOUT seconds (default 5) against
EXPORT_STREAM_SECONDS = BENCH_TIMEOUT * 2 / 3: the parts it took, and whether every part's trailer
verifies and the rows add up to the whole set.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import tracemalloc
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
TIMEOUT = int(os.getenv("BENCH_TIMEOUT", "5"))


def in_process(fmt: str, *, after: int = 0, traced: bool = False) -> tuple[int, float, int, int]:
    """(rows, seconds, bytes, peak traced bytes) of an export of the runs after `after`, in this
    process; with `traced`, under tracemalloc (slower: time it untraced)."""
    from runs.read import exports

    queryset, _, _ = exports.filtered({})
    if traced:
        tracemalloc.start()
    start = time.perf_counter()
    size = 0
    for data in exports.stream(fmt, exports.rows(queryset, after=after)):
        size += len(data)
        last = data
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] if traced else 0
    tracemalloc.stop()
    # The trailer's count: `rows=N` in CSV, `"rows": N` in JSON lines.
    rows = int(re.search(rb"rows\W+(\d+)", last.splitlines()[-1])[1])
    return rows, seconds, size, peak


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def through_gunicorn(fmt: str) -> tuple[int, int, float, bool]:
    """(parts, rows, seconds, every part verified) of a whole export fetched over HTTP."""
    from runs.read import exports

    port = free_port()
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": "bench-export-not-secret-" + "x" * 40,
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "0",
        "EXPORT_STREAM_SECONDS": str(TIMEOUT * 2 / 3),
        "LOG_LEVEL": "WARNING",
    }
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=REPO, env=env, check=True,
    )  # fmt: skip
    gunicorn = str(Path(sys.executable).with_name("gunicorn"))
    proc = subprocess.Popen(
        [gunicorn, "kernelindex.wsgi", "-b", f"127.0.0.1:{port}", "-w", "1",
         "--timeout", str(TIMEOUT), "--log-level", "warning"],
        cwd=REPO, env=env, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(150):
            try:
                urllib.request.urlopen(base + "/healthz", timeout=1).read()
                break
            except OSError:
                time.sleep(0.2)
        url, parts, rows, whole = f"{base}/api/v1/runs/export.{fmt}", 0, 0, True
        start = time.perf_counter()
        while url:
            with urllib.request.urlopen(url, timeout=TIMEOUT * 4) as response:
                body = response.read()
            trailer = exports.verify(fmt, body)
            parts += 1
            if trailer is None:
                whole = False
                break
            rows += trailer.rows
            url = trailer.next
        return parts, rows, time.perf_counter() - start, whole
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    if not os.getenv("DATABASE_URL", "").startswith("postgres"):
        sys.exit("set DATABASE_URL to a loaded PostgreSQL database")
    import django

    django.setup()
    from runs.models import Run

    total = Run.objects.public().count()
    print(f"{total:,} current runs · python {sys.version.split()[0]}")
    print(
        f"gunicorn: 1 sync worker, --timeout {TIMEOUT}, EXPORT_STREAM_SECONDS {TIMEOUT * 2 / 3:.1f}"
    )
    # Where the last SMALL rows start: memory for SMALL rows against memory for all of them.
    small = 10_000
    tail = Run.objects.public().order_by("-id").values_list("id", flat=True)[small : small + 1]
    print("| format | rows | s | rows/s | MB | peak Python MB, all rows | peak Python MB, "
          f"last {small:,} | HTTP parts | HTTP s | whole |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for fmt in ("csv", "jsonl"):
        rows, seconds, size, _ = in_process(fmt)
        peak_all = in_process(fmt, traced=True)[3]
        peak_small = in_process(fmt, after=tail[0], traced=True)[3]
        parts, http_rows, http_s, whole = through_gunicorn(fmt)
        ok = "yes" if whole and http_rows == rows == total else "NO"
        print(
            f"| {fmt} | {rows:,} | {seconds:.1f} | {rows / seconds:,.0f} | {size / 1e6:.1f} "
            f"| {peak_all / 1e6:.1f} | {peak_small / 1e6:.1f} | {parts} | {http_s:.1f} | {ok} |"
        )


if __name__ == "__main__":
    main()

"""Serve the site with gunicorn on PostgreSQL loaded with both Liger sources and measure it with
wrk, in one run.

Prints requests/s of the run page (page cache on and off), a benchmark page and the API list,
each divided by the requests/s of /healthz (a Django view that does no database work) served by
the same gunicorn configuration, and the p50 latency of an uncached run page with one
connection (on loopback that is the server time plus a few tens of microseconds).

    .venv/bin/python bench/pages.py            # DATABASE_URL defaults to ki_bench_pages

Loopback only; every wrk run is bounded (BENCH_SECONDS, default 5). Targets: run page >= 0.8 of
trivial when cached, >= 0.15 uncached; p50 uncached < 15 ms.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
DATABASE_URL = os.getenv("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/ki_bench_pages")
REDIS_URL = os.getenv("BENCH_REDIS_URL", "redis://127.0.0.1:6379/1")
SECONDS = int(os.getenv("BENCH_SECONDS", "5"))
WORKERS = int(os.getenv("BENCH_WORKERS", str(os.cpu_count() or 2)))
CONNECTIONS = int(os.getenv("BENCH_CONNECTIONS", "8"))
EXAMPLE = (
    "llama4_rope/forward/huggingface/nvidia-h100-80gb-hbm3/"
    "hidden8192-kv_heads8-q_heads32-seq4096-bf16/2025-08-07-21-42-12"
)


def env(page_cache: int) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": DATABASE_URL,
        "REDIS_URL": REDIS_URL,
        "CACHE_PREFIX": "ki-bench-pages",
        "DEBUG": "0",
        "SECRET_KEY": "bench-pages-not-secret-" + "x" * 40,
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "0",
        "PAGE_CACHE_SECONDS": str(page_cache),
        "LOG_LEVEL": "WARNING",
    }


def manage(*args: str) -> str:
    out = subprocess.run(
        [PYTHON, "manage.py", *args] + (["--no-imports"] if args[0] == "shell" else []),
        cwd=REPO,
        env=env(0),
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout


def prepare() -> tuple[str, str]:
    """Migrate, load both Liger sources if the database is empty, collect static files."""
    manage("migrate", "--noinput", "-v0")
    manage("collectstatic", "--noinput", "-v0")
    count = manage("shell", "-c", "from runs.models import Run; print(Run.objects.count())")
    if int(count.strip()) == 0:
        print("empty database: ingesting both Liger sources (a few minutes)")
        manage("ingest", "liger-kernel-bench", "data/liger/all_benchmark_data.csv")
        manage("ingest", "liger-kernel-ci", "data/liger-ci")
    # Fresh planner statistics: right after a bulk load PostgreSQL guesses row counts badly.
    manage(
        "shell", "-c", "from django.db import connection; connection.cursor().execute('ANALYZE')"
    )
    public_id = manage(
        "shell",
        "-c",
        f"from runs.models import Run; print(Run.objects.public().get(external_id={EXAMPLE!r}).public_id)",
    ).strip()
    runs = manage("shell", "-c", "from runs.models import Run; print(Run.objects.count())")
    return public_id, runs.strip()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, page_cache: int) -> None:
        self.port = free_port()
        gunicorn = str(Path(PYTHON).with_name("gunicorn"))
        self.proc = subprocess.Popen(
            [gunicorn, "kernelindex.wsgi", "-b", f"127.0.0.1:{self.port}", "-w", str(WORKERS),
             "--log-level", "warning"],
            cwd=REPO, env=env(page_cache), start_new_session=True,
        )  # fmt: skip
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.base + "/healthz", timeout=1).read()
                return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("gunicorn did not answer /healthz within 30 s")

    def get(self, path: str) -> tuple[int, dict]:
        with urllib.request.urlopen(self.base + path, timeout=10) as r:
            r.read()
            return r.status, dict(r.headers)

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=20)


def wrk(url: str, connections: int = CONNECTIONS, threads: int = 2) -> dict[str, float]:
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{connections}", f"-d{SECONDS}s", "--latency", url],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        raise RuntimeError(f"{url}: {errors.group(1)} error responses\n{out}")
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)\b", out)
    factor = {"us": 1e-3, "ms": 1.0, "s": 1e3}[p50.group(2)]
    return {"rps": rps, "p50_ms": float(p50.group(1)) * factor}


def main() -> None:
    if not shutil.which("wrk"):
        sys.exit("needs wrk (apt-get install wrk)")
    public_id, runs = prepare()
    run_page = f"/runs/{public_id}/"
    bench_page = "/benchmarks/llama4_rope/"
    api_list = "/api/v1/runs/?benchmark=llama4_rope"
    print(f"database: {runs} runs · gunicorn: {WORKERS} sync workers · wrk: {CONNECTIONS} "
          f"connections, {SECONDS} s per figure · run page {run_page}")  # fmt: skip
    rows: list[tuple[str, dict, float]] = []  # (name, result, trivial req/s beside it)

    def measure(server: Server, name: str, path: str, **kw) -> dict:
        # The machine may be shared: measure the trivial view right before and after each
        # figure and divide by their mean, so both see the same background load.
        before = wrk(server.base + "/healthz")["rps"]
        result = wrk(server.base + path, **kw)
        after = wrk(server.base + "/healthz")["rps"]
        rows.append((name, result, (before + after) / 2))
        return result

    cached = Server(page_cache=300)
    try:
        for path in (run_page, bench_page, api_list):
            status, headers = cached.get(path)  # warm the cache
            assert status == 200, (path, status)
        status, headers = cached.get(run_page)
        assert headers.get("X-Page-Cache") == "hit", headers
        measure(cached, "run page, cached", run_page)
        measure(cached, "benchmark page, cached", bench_page)
        measure(cached, "API list, cached", api_list)
    finally:
        cached.stop()

    uncached = Server(page_cache=0)
    try:
        status, headers = uncached.get(run_page)
        assert status == 200 and "X-Page-Cache" not in headers, headers
        measure(uncached, "run page, uncached", run_page)
        measure(uncached, "benchmark page, uncached", bench_page)
        measure(uncached, "API list, uncached", api_list)
        single = wrk(uncached.base + run_page, connections=1, threads=1)
    finally:
        uncached.stop()

    print(f"\n{'':28} {'req/s':>9} {'trivial req/s':>14} {'ratio':>7}")
    ratios = {}
    for name, r, trivial in rows:
        ratios[name] = r["rps"] / trivial
        print(f"{name:28} {r['rps']:9.0f} {trivial:14.0f} {ratios[name]:7.2f}")
    cached_ratio = ratios["run page, cached"]
    uncached_ratio = ratios["run page, uncached"]
    print(f"\np50 of an uncached run page, one connection: {single['p50_ms']:.2f} ms "
          f"({single['rps']:.0f} req/s)")  # fmt: skip
    checks = [
        ("run page cached >= 0.8 of trivial", cached_ratio >= 0.8, f"{cached_ratio:.2f}"),
        ("run page uncached >= 0.15 of trivial", uncached_ratio >= 0.15, f"{uncached_ratio:.2f}"),
        ("p50 uncached run page < 15 ms", single["p50_ms"] < 15, f"{single['p50_ms']:.2f} ms"),
    ]
    print()
    for label, ok, value in checks:
        print(f"{'PASS' if ok else 'MISS'}  {label}: {value}")
    sys.exit(0 if all(ok for _, ok, _ in checks) else 1)


if __name__ == "__main__":
    main()

"""Ingest all 77,648 liger-kernel-ci rows into PostgreSQL and compare with a plain COPY.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ki_bench_ingest .venv/bin/python bench/ingest.py

In one run: (1) COPY the same CSV rows into a scratch table (the floor: bytes into PostgreSQL
with no parsing, digests or indexes of ours); (2) a full ingest into an empty schema;
(3) a re-ingest of the same files, which must create and change nothing. Prints rows/s and
the ratios. The database named by DATABASE_URL is dropped and recreated.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psycopg

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
CI_ROOT = Path(os.getenv("LIGER_CI", REPO / "data" / "liger-ci"))


def reset_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def copy_floor(url: str, files: list[Path]) -> tuple[int, float]:
    """COPY every data row, as text columns, into an unlogged-free scratch table."""
    with psycopg.connect(url) as conn:
        conn.execute(
            "CREATE TABLE scratch_copy (kernel_name text, kernel_provider text, "
            "kernel_operation_mode text, metric_name text, metric_unit text, x_name text, "
            "x_label text, x_value text, y_value_50 text, y_value_20 text, y_value_80 text, "
            "extra_benchmark_config_str text, gpu_name text, timestamp text, liger_version text)"
        )
        start = time.perf_counter()
        with conn.cursor() as cur:
            for path in files:
                with cur.copy(
                    "COPY scratch_copy FROM STDIN WITH (FORMAT csv, HEADER true)"
                ) as copy:
                    copy.write(path.read_bytes())
        conn.commit()
        elapsed = time.perf_counter() - start
        rows = conn.execute("SELECT count(*) FROM scratch_copy").fetchone()[0]
        conn.execute("DROP TABLE scratch_copy")
        conn.commit()
    return rows, elapsed


def main() -> None:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        sys.exit("set DATABASE_URL to a PostgreSQL database this script may drop and recreate")
    reset_database(url)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from runs.models import Run
    from runs.services import ingest
    from runs.sources import liger_ci

    call_command("migrate", verbosity=0)
    files = [Path(item.location) for item in liger_ci.inputs([str(CI_ROOT)])]
    copy_rows, copy_s = copy_floor(url, files)

    start = time.perf_counter()
    reports = ingest(source_slug="liger-kernel-ci", locations=[str(CI_ROOT)])
    first_s = time.perf_counter() - start
    created = sum(r.created for r in reports)

    start = time.perf_counter()
    again = ingest(source_slug="liger-kernel-ci", locations=[str(CI_ROOT)])
    second_s = time.perf_counter() - start
    changed = sum(r.created + r.revised for r in again)

    rows = sum(r.rows for r in reports)
    print(f"files                 {len(files)}")
    print(f"rows                  {rows} (COPY saw {copy_rows}; runs in DB {Run.objects.count()})")
    print(f"COPY into scratch     {copy_s:8.2f} s  {copy_rows / copy_s:10.0f} rows/s")
    print(
        f"ingest (empty DB)     {first_s:8.2f} s  {rows / first_s:10.0f} rows/s  created {created}"
    )
    print(
        f"re-ingest (no change) {second_s:8.2f} s  {rows / second_s:10.0f} rows/s  changed {changed}"
    )
    print(f"ratio ingest / COPY   {first_s / copy_s:8.1f}x slower")
    print(f"ratio re-ingest / COPY {second_s / copy_s:7.1f}x slower")
    print(f"targets: ingest < 60 s: {'met' if first_s < 60 else 'MISSED'}; "
          f"re-ingest < 15 s: {'met' if second_s < 15 else 'MISSED'}")  # fmt: skip


if __name__ == "__main__":
    main()

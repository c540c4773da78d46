"""Ingest the liger-kernel-ci rows into PostgreSQL and compare with a plain COPY of the same rows.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ki_bench_ingest .venv/bin/python bench/ingest.py
    ... bench/ingest.py --profile        # cProfile of each pass, top entries by own time
    ... bench/ingest.py --files 9        # only the first 9 CI runs (memory against row count)

main() drops and recreates the database named by DATABASE_URL, migrates (DEBUG off unless
set), and prints:
(1) the app's first ingest of every file into the empty schema, and (2) a re-ingest of the same
files, which must create and change nothing: seconds, rows/s, queries and peak RSS of each;
(3) the floors: the run rows the ingest wrote, COPYed as they are (same columns, same bytes)
into a scratch table with runs_run's columns and no index, and into one with runs_run's indexes
too; and the upstream CSV rows COPYed as text columns. Ratios are ingest rows/s over COPY rows/s.

`measure(paths, source_slug=...)` is the same measurement against the database already
configured (bench/scale.py calls it at each size), without resetting anything.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
CI_ROOT = Path(os.getenv("LIGER_CI", REPO / "data" / "liger-ci"))


def _peak_reset() -> None:
    """Start a new peak-RSS window (Linux: writing 5 to clear_refs resets VmHWM)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _peak_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed_ingest(source_slug: str, paths: list[str], profile: bool) -> dict:
    from django.db import connection

    from runs.sources.pipeline import ingest

    queries = 0

    def count(execute, sql, params, many, context):
        nonlocal queries
        queries += 1
        return execute(sql, params, many, context)

    profiler = cProfile.Profile() if profile else None
    _peak_reset()
    start = time.perf_counter()
    with connection.execute_wrapper(count):
        if profiler:
            profiler.enable()
        reports = ingest(source_slug=source_slug, locations=paths)
        if profiler:
            profiler.disable()
    seconds = time.perf_counter() - start
    rows = sum(r.rows for r in reports)
    out = {
        "rows": rows,
        "seconds": seconds,
        "rows_per_s": rows / seconds,
        "created": sum(r.created for r in reports),
        "changed": sum(r.created + r.revised for r in reports),
        "queries": queries,
        "peak_rss_mb": _peak_mb(),
        "publications": sorted({r.publication for r in reports}),
    }
    if profiler:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
        out["profile"] = text.getvalue()
    return out


def copy_floor(source_slug: str, publications: list[str], *, indexed: bool = False) -> dict:
    """COPY the current runs of these publications, column for column as the ingest wrote
    them, into a scratch table shaped like runs_run (with its indexes when `indexed`)."""
    from django.db import connection, transaction

    from runs.models import Run

    fields = [f for f in Run._meta.concrete_fields if not f.primary_key]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    table = connection.ops.quote_name(Run._meta.db_table)
    like = "INCLUDING ALL" if indexed else "INCLUDING DEFAULTS INCLUDING IDENTITY"
    with tempfile.TemporaryFile() as spool:
        with connection.cursor() as cursor:
            # The psycopg cursor itself: Django's wrapper takes no parameters for COPY.
            with cursor.cursor.copy(
                f"COPY (SELECT {columns} FROM {table} WHERE is_current AND publication_id IN "
                f"(SELECT p.id FROM runs_publication p JOIN runs_source s ON s.id = p.source_id"
                f" WHERE s.slug = %s AND p.slug = ANY(%s))) TO STDOUT",
                [source_slug, publications],
            ) as copy:
                for block in copy:
                    spool.write(block)
        size = spool.tell()
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"CREATE TEMPORARY TABLE scratch_runs (LIKE {table} {like})")
            spool.seek(0)
            start = time.perf_counter()
            with cursor.copy(f"COPY scratch_runs ({columns}) FROM STDIN") as copy:
                while block := spool.read(1 << 20):
                    copy.write(block)
            seconds = time.perf_counter() - start
            cursor.execute("SELECT count(*) FROM scratch_runs")
            rows = cursor.fetchone()[0]
            transaction.set_rollback(True)
    return {"rows": rows, "seconds": seconds, "rows_per_s": rows / seconds, "mb": size / 2**20}


def csv_copy_floor(files: list[Path]) -> dict:
    """The upstream CSV rows COPYed as 15 text columns: bytes into PostgreSQL, no more."""
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMPORARY TABLE scratch_csv (kernel_name text, kernel_provider text, "
            "kernel_operation_mode text, metric_name text, metric_unit text, x_name text, "
            "x_label text, x_value text, y_value_50 text, y_value_20 text, y_value_80 text, "
            "extra_benchmark_config_str text, gpu_name text, timestamp text, liger_version text)"
        )
        start = time.perf_counter()
        for path in files:
            with cursor.copy("COPY scratch_csv FROM STDIN WITH (FORMAT csv, HEADER true)") as copy:
                copy.write(path.read_bytes())
        seconds = time.perf_counter() - start
        cursor.execute("SELECT count(*) FROM scratch_csv")
        rows = cursor.fetchone()[0]
        transaction.set_rollback(True)
    return {"rows": rows, "seconds": seconds, "rows_per_s": rows / seconds}


def measure(paths: list[str], *, source_slug: str, profile: bool = False) -> dict:
    """Ingest `paths` (first pass), ingest them again (must change nothing), then COPY the
    rows written into a scratch table with runs_run's columns. Figures of the first pass are
    the top-level keys; `again` holds the second pass, `copy_indexed` the indexed floor."""
    first = _timed_ingest(source_slug, paths, profile)
    again = _timed_ingest(source_slug, paths, profile)
    floor = copy_floor(source_slug, first["publications"])
    indexed = copy_floor(source_slug, first["publications"], indexed=True)
    return {
        **first,
        "copy_rows_per_s": floor["rows_per_s"],
        "copy_rows": floor["rows"],
        "copy_mb": floor["mb"],
        "copy_indexed_rows_per_s": indexed["rows_per_s"],
        "ratio": first["rows_per_s"] / floor["rows_per_s"],
        "again": again,
        "again_ratio": again["rows_per_s"] / floor["rows_per_s"],
    }


def reset_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=0, help="only the first N CI runs")
    parser.add_argument("--profile", action="store_true", help="cProfile both passes")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        sys.exit("set DATABASE_URL to a PostgreSQL database this script may drop and recreate")
    reset_database(url)
    # As in production: with DEBUG on, Django keeps the SQL of every query in memory (and
    # spends time formatting it), which is no part of what an ingest costs.
    os.environ.setdefault("DEBUG", "0")
    os.environ.setdefault("SECRET_KEY", "bench-ingest-" + "x" * 40)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from runs.sources import liger_ci

    call_command("migrate", verbosity=0)
    items = liger_ci.inputs([str(CI_ROOT)])
    if args.files:
        items = items[: args.files]
    paths = [item.location for item in items]
    del items
    m = measure(paths, source_slug=liger_ci.SLUG, profile=args.profile)
    csv = csv_copy_floor([Path(p) for p in paths])
    again = m["again"]
    print(f"files                      {len(paths)}")
    print(f"rows                       {m['rows']} (created {m['created']}; COPY floors saw "
          f"{m['copy_rows']} run rows, {m['copy_mb']:.0f} MiB, and {csv['rows']} CSV rows)")  # fmt: skip
    print(f"COPY run rows, no index    {m['copy_rows_per_s']:10.0f} rows/s")
    print(f"COPY run rows, indexed     {m['copy_indexed_rows_per_s']:10.0f} rows/s")
    print(f"COPY CSV text columns      {csv['rows_per_s']:10.0f} rows/s")
    for label, run in (("ingest (empty DB)", m), ("re-ingest (no change)", again)):
        print(
            f"{label:26} {run['rows_per_s']:10.0f} rows/s  {run['seconds']:7.2f} s  "
            f"{run['queries']:5d} queries  peak RSS {run['peak_rss_mb']:5.0f} MB  "
            f"changed {run['changed']}"
        )
    print(f"ratio ingest / COPY        {m['ratio']:10.3f}  (indexed COPY "
          f"{m['rows_per_s'] / m['copy_indexed_rows_per_s']:.3f}, CSV COPY "
          f"{m['rows_per_s'] / csv['rows_per_s']:.3f})")  # fmt: skip
    print(f"ratio re-ingest / COPY     {m['again_ratio']:10.3f}  (indexed COPY "
          f"{again['rows_per_s'] / m['copy_indexed_rows_per_s']:.3f}, CSV COPY "
          f"{again['rows_per_s'] / csv['rows_per_s']:.3f})")  # fmt: skip
    print(f"target ingest >= 0.1x COPY: {'met' if m['ratio'] >= 0.1 else 'MISSED'}; "
          f"re-ingest faster than ingest: {'met' if again['seconds'] < m['seconds'] else 'MISSED'}")  # fmt: skip
    if args.profile:
        for label, run in (("first ingest", m), ("re-ingest", again)):
            print(f"\n== profile, {label} ==\n{run['profile']}")


if __name__ == "__main__":
    main()

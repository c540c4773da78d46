"""The demo's controlled-rerun load: wall time and queries of `manage.py rerun load-demo` over
every folder under data/reruns/, as `manage.py demo` loads them (reruns/demo.py).

    DATABASE_URL=sqlite:////tmp/demo-load.sqlite3 .venv/bin/python bench/demo_load.py --ingest
    DATABASE_URL=sqlite:////tmp/demo-load.sqlite3 .venv/bin/python bench/demo_load.py [FOLDER ...]

--ingest first migrates the database and ingests the three upstream sources as `manage.py
demo` does (about a minute and a half on SQLite); run it once, copy the database file, and
load a fresh copy per measurement: a second load of the same folders finds every job present
and records nothing. Figures: docs/performance.md, "Demo load". The script calls management
commands only, so it measures an older checkout of the code as well.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from io import StringIO
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="*", help="default: every folder under data/reruns/")
    parser.add_argument("--ingest", action="store_true", help="migrate and ingest, then stop")
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    data = REPO / "data"
    if args.ingest:
        call_command("migrate", interactive=False, verbosity=0)
        call_command("ingest", "liger-kernel-bench", str(data / "liger" / "all_benchmark_data.csv"))
        call_command("ingest", "liger-kernel-ci", str(data / "liger-ci"))
        call_command("ingest", "kernelbench", str(data / "kernelbench"))
        return

    from reruns.models import ResultReceipt

    folders = [Path(f) for f in args.folders] or sorted(
        p for p in (data / "reruns").glob("*") if p.is_dir() and any(p.glob("jobs/*.json"))
    )
    queries = 0

    def count(execute, sql, params, many, context):
        nonlocal queries
        queries += 1
        return execute(sql, params, many, context)

    before = ResultReceipt.objects.count()
    started = time.perf_counter()
    with connection.execute_wrapper(count):
        for folder in folders:
            call_command("rerun", "load-demo", str(folder), stdout=StringIO(), stderr=StringIO())
    seconds = time.perf_counter() - started
    results = ResultReceipt.objects.count() - before
    print(f"{len(folders)} folders, {results} results recorded in {seconds:.1f} s")
    if results:
        print(f"{1000 * seconds / results:.1f} ms and {queries / results:.1f} queries a result")


if __name__ == "__main__":
    main()

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connection

from runs.extensions import run_extensions

DATA = Path(settings.BASE_DIR) / "data"


class Command(BaseCommand):
    help = "Create the database, load every shipped source (idempotent), and serve the site."

    def add_arguments(self, parser):
        parser.add_argument("--no-serve", action="store_true", help="load the data and stop")
        parser.add_argument(
            "addrport",
            nargs="?",
            default="127.0.0.1:8000",
            help="where to serve, as for runserver: a port (8080) or address:port "
            "(0.0.0.0:8080); default 127.0.0.1:8000",
        )

    def handle(self, *args, no_serve: bool, addrport: str, **options):
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write(
            "Loading Liger-Kernel, its CI runs, KernelBench and the signed reruns "
            "(a few minutes the first time)"
        )
        with _queries_not_logged():
            call_command(
                "ingest", "liger-kernel-bench", str(DATA / "liger" / "all_benchmark_data.csv")
            )
            call_command("ingest", "liger-kernel-ci", str(DATA / "liger-ci"))
            call_command("ingest", "kernelbench", str(DATA / "kernelbench"))
            # The apps built on runs load their own (runs.extensions.DemoLoader).
            for loader in run_extensions.demo_loaders():
                loader.load(DATA)
        if not no_serve:
            call_command("runserver", addrport, use_reloader=False)


@contextmanager
def _queries_not_logged():
    """The load without DEBUG's query log, which the quick start has on: the log keeps the
    last 9,000 of some 150,000 statements, and on SQLite each logged statement costs a second
    one that quotes its parameters. The demo's reruns loaded in 97.9 s under DEBUG and 90.2 s
    with DEBUG off (bench/demo_load.py, SQLite, 2026-12-06)."""
    connection.make_debug_cursor = connection.make_cursor
    try:
        yield
    finally:
        del connection.make_debug_cursor  # the class's own again

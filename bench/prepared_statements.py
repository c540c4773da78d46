"""Uncached pages with and without prepared statements, the same code and database, in turns.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ki_scale_1m \
        python bench/prepared_statements.py [--rounds 3] [--seconds 4]

For each round, gunicorn as bench/scale.py runs it (2 sync workers, DEBUG=0, page cache off)
is started with DB_PREPARED_STATEMENTS=0 and then =1 (the order swaps every round), and each
page kind is measured interleaved with the trivial view, as bench/scale.py does. Prints each
figure, then per page the median ratio to the trivial view with and without, and their ratio.
The database is a bench/scale.py one (its demo runs name the pages).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import scale  # noqa: E402  (bench/scale.py: the server, the load and the pages)

PAGES = (
    "run page",
    "run page, random run each request",
    "browse, 2 filters",
    "API list",
    "manifest .json",
    "source page",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    url = os.environ["DATABASE_URL"]
    static_root = tempfile.mkdtemp(prefix="ki-prepared-static-")
    os.environ.update(scale.server_env(url, 0, static_root))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("collectstatic", interactive=False, verbosity=0)
    pages = [(name, paths) for name, paths in scale.pick_pages() if name in PAGES]
    ratios: dict[tuple[str, str], list[float]] = {}
    for round_ in range(args.rounds):
        for prepared in ("0", "1") if round_ % 2 == 0 else ("1", "0"):
            os.environ["DB_PREPARED_STATEMENTS"] = prepared
            server = scale.Server(url, 0, static_root)
            try:
                for name, paths in pages:
                    for path in paths[:3]:  # each worker's connection has run the page
                        for _ in range(5 * scale.WORKERS):
                            server.get(path)
                    r = scale.interleaved(server.port, paths, args.seconds)
                    ratio = r["rps"] / r["trivial_rps"]
                    ratios.setdefault((name, prepared), []).append(ratio)
                    print(
                        f"round {round_ + 1} prepared={prepared} {name:34} {r['rps']:7.1f} req/s "
                        f"trivial {r['trivial_rps']:6.0f} ratio {ratio:.3f} "
                        f"p99 {r['p99_ms']:5.0f} ms errors {r['errors']}",
                        flush=True,
                    )
            finally:
                server.stop()
    print("\n| page | ratio, not prepared | ratio, prepared | prepared / not |")
    print("|---|---|---|---|")
    for name, _ in pages:
        off = statistics.median(ratios[(name, "0")])
        on = statistics.median(ratios[(name, "1")])
        print(f"| {name} | {off:.3f} | {on:.3f} | {on / off:.2f} |")


if __name__ == "__main__":
    main()

"""The site at two sizes: the demo data (about 80k runs) and N runs (default 1,000,000).

    DJANGO_SETTINGS_MODULE=kernelindex.settings .venv/bin/python bench/scale.py \
        [--runs N] [--sizes 80k,N] [--skip-build | --build-only] [--seconds S]
        [--pages "label;label"]

For each size, in one PostgreSQL database of its own (ki_scale_80k, ki_scale_1m, ...):
1. Build (resumable; --skip-build only migrates what is there). The first size is the real demo
   data (`manage.py demo --no-serve`: both Liger sources, KernelBench and the reruns). A larger
   size starts as a copy of it and grows through the real ingest path (runs.sources.pipeline.ingest)
   with synthetic CI feeds: the CSVs of data/liger-ci re-labelled under new commit ids
   (sha1 of "scale-<copy>-<run folder>") with their timestamps moved by <copy> days, so each copy
   of a CI run is a new publication of the liger-kernel-ci source. These extra rows are copies
   of real rows made for load testing only; they are written to a temporary folder, never
   under data/, and never describe a real measurement.
2. Ingest: one more re-labelled copy of all CI rows (77,648) ingested into the database at this
   size, against a plain COPY of the same rows into a scratch table shaped like runs_run, both
   in one transaction that is rolled back (the database keeps its size).
3. Query count per request of every page kind, in process (django.test.Client), uncached and
   cached (the versions query of each request counted); and, page cache on, the first request
   of the home page, browse and two run pages after one pending attestation and one job claim
   on one of those runs (rolled back).
4. HTTP: gunicorn with 2 sync workers and DEBUG=0, a load of 16 concurrent connections from
   threads of this process; each page kind in short windows alternating with windows of the
   trivial view /healthz, uncached (PAGE_CACHE_SECONDS=0) and cached (repeated anonymous GET).
5. The indexes of runs_run with their sizes, and bench/explain.py's plans where it exists.

Then one markdown report: ingest against COPY, and per page kind req/s, ratio to the trivial
view, p50/p99, errors and queries at each size, and the ratio of the largest size to 80k.
Results of each size are kept in bench/out/scale-<size>.json.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import http.client
import io
import itertools
import json
import math
import os
import platform
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
CI_ROOT = REPO / "data" / "liger-ci"
OUT = REPO / "bench" / "out"
PG_ROOT = os.getenv("BENCH_PG_ROOT", "postgres://postgres@127.0.0.1:5432")
REDIS_URL = os.getenv("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
# The databases' names start with this (BENCH_DB_PREFIX): two people measuring on one server
# each build their own.
DB_PREFIX = os.getenv("BENCH_DB_PREFIX", "ki_scale")
DEMO = 80_000  # the first size: whatever the demo loads (80,116 runs today)
CI_SLUG = "liger-kernel-ci"
EXAMPLE = "8827e3bb"  # the README's example run: Llama 4 RoPE, forward, Hugging Face, H100
WORKERS = 2
CONNECTIONS = 16
WINDOW = 1.5  # seconds of one measurement window; page and trivial windows alternate
CLIENT_TIMEOUT = 40  # above gunicorn's 30 s worker timeout: the server gives up first
MEASURE_COPY = 999  # copy number of the rows ingested and rolled back; never built
# Runs drawn for the random-run row: each request another run, in both modes together (at
# 2,000 a fast host came round to the first runs again in the cached mode, whose kept parts
# the uncached mode had stored).
RANDOM_RUNS = 10_000
SMALL_CI_RUN = "b6ed735"  # the smallest CI run (54 rows): the ingest of the after-write figures
TS_FORMAT = "%Y-%m-%d %H:%M:%S"


# Sizes -----------------------------------------------------------------------------------


def parse_size(text: str) -> int:
    text = text.strip().lower().replace(",", "").replace("_", "")
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * factor)


def size_label(n: int) -> str:
    if n % 1_000_000 == 0:
        return f"{n // 1_000_000}m"
    if n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


def database_url(n: int) -> str:
    return f"{PG_ROOT}/{DB_PREFIX}_{size_label(n)}"


# Synthetic CI feeds ----------------------------------------------------------------------


def copy_commit(copy: int, folder: str) -> str:
    """The commit id a re-labelled copy of a CI run is published under (7 hex, like upstream).
    From the whole folder name: a release folder (0a62700-v0.6.4) is a run of its own beside
    the plain commit's (0a62700), and its copy must not land on the same name."""
    return hashlib.sha1(f"scale-{copy}-{folder}".encode()).hexdigest()[:7]


def ci_folders(root: Path) -> list[str]:
    """The CI runs of a root folder in upstream order (commits.txt first, like the source)."""
    folders = sorted(p.name for p in root.iterdir() if (p / "benchmark.csv").exists())
    order = root / "commits.txt"
    listed = order.read_text().split() if order.exists() else []
    return [f for f in listed if f in folders] + [f for f in folders if f not in listed]


def relabel(root: Path, dest: Path, copy: int, folders: list[str] | None = None) -> list[str]:
    """Write copy number `copy` of the CI runs of `root` under `dest` as a CI root folder.

    Each run folder is named by a new commit (copy_commit; a release suffix is dropped, a copy
    is no release) and every timestamp moves `copy` days later; the rows are otherwise the
    upstream rows. Returns the new folder names, in upstream order (also in commits.txt).
    """
    names = []
    for folder in folders if folders is not None else ci_folders(root):
        name = copy_commit(copy, folder)
        with (root / folder / "benchmark.csv").open(newline="") as f:
            rows = list(csv.reader(f))
        column = rows[0].index("timestamp")
        for row in rows[1:]:
            moved = datetime.strptime(row[column], TS_FORMAT) + timedelta(days=copy)
            row[column] = moved.strftime(TS_FORMAT)
        (dest / name).mkdir(parents=True, exist_ok=True)
        with (dest / name / "benchmark.csv").open("w", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows(rows)
        names.append(name)
    (dest / "commits.txt").write_text("\n".join(names) + "\n")
    return names


def data_rows(path: Path) -> int:
    with path.open(newline="") as f:
        return sum(1 for _ in csv.reader(f)) - 1


# Report ----------------------------------------------------------------------------------


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _num(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "–"
    return f"{x:,.{digits}f}"


def pages_table(sizes: list[dict]) -> str:
    """One markdown table: per page kind and mode, each size's req/s, ratio to the trivial
    view, p50/p99 ms, errors and queries; last, the largest size's ratio to trivial divided by
    the first size's (1.00 = the page costs the same at both sizes, relative to the trivial
    view measured beside it)."""
    first, last = sizes[0], sizes[-1]
    head = ["page", "mode"]
    for s in sizes:
        lab = s["label"]
        head += [f"{lab} req/s", f"{lab} ratio", f"{lab} p50/p99 ms", f"{lab} err", f"{lab} q"]
    if len(sizes) > 1:
        head.append(f"{last['label']}/{first['label']}")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keyed = [{(r["page"], r["mode"]): r for r in s["pages"]} for s in sizes]
    for key in keyed[0]:
        cells = [key[0], key[1]]
        for rows in keyed:
            r = rows.get(key)
            if r is None:
                cells += ["–"] * 5
                continue
            cells += [
                _num(r["rps"], 1 if r["rps"] < 10 else 0),
                _num(_ratio(r["rps"], r["trivial_rps"]), 3),
                f"{_num(r['p50_ms'])}/{_num(r['p99_ms'])}",
                f"{r['errors']}/{r['requests']}" if r["errors"] else "0",
                str(r["queries"]) if r.get("queries") is not None else "–",
            ]
        if len(sizes) > 1:
            a, b = keyed[0].get(key), keyed[-1].get(key)
            scale = (
                _ratio(_ratio(b["rps"], b["trivial_rps"]), _ratio(a["rps"], a["trivial_rps"]))
                if a and b
                else None
            )
            # Failed requests at either size: the ratio counts only the answered ones.
            failed = any(r and r["errors"] for r in (a, b))
            cells.append(_num(scale, 2) + (" (errors)" if failed else ""))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def after_write_table(sizes: list[dict]) -> str:
    """In-process ms of the first request of each page after one write, per size."""
    lines = [
        "### First request after one write (in process, page cache on; ms, and hit or miss)",
        "",
        "| size | write | "
        + " | ".join(next(iter(sizes[0].get("after_write", {}).values()), {}))
        + " |",
    ]
    lines.append("|" + "---|" * (lines[-1].count("|") - 1))
    for s in sizes:
        for write, figures in s.get("after_write", {}).items():
            cells = [f"{f['ms']:.1f} ({f['cache']})" for f in figures.values()]
            lines.append(f"| {s['label']} | {write} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ingest_table(sizes: list[dict]) -> str:
    lines = [
        "| size | runs | rows ingested | ingest s | ingest rows/s | COPY rows/s | ingest/COPY | "
        "COPY CSV rows/s | ingest/COPY CSV | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in sizes:
        i = s["ingest"]
        if not i:
            continue
        lines.append(
            f"| {s['label']} | {s['runs']:,} | {i['rows']:,} | {i['seconds']:.1f} | "
            f"{i['rows_per_s']:,.0f} | {i['copy_rows_per_s']:,.0f} | "
            f"{_num(_ratio(i['rows_per_s'], i['copy_rows_per_s']), 4)} | "
            f"{_num(i.get('csv_copy_rows_per_s'))} | "
            f"{_num(_ratio(i['rows_per_s'], i.get('csv_copy_rows_per_s')), 4)} | "
            f"{i['peak_rss_mb']:.0f} |"
        )
    return "\n".join(lines)


def indexes_table(size: dict) -> str:
    lines = ["| index | MB |", "|---|---|"]
    lines += [f"| {name} | {mb:,.1f} |" for name, mb in size["indexes"]]
    total = sum(mb for _, mb in size["indexes"])
    lines.append(f"| **{len(size['indexes'])} indexes, total** | **{total:,.1f}** |")
    lines.append(f"| table runs_run (heap) | {size['table_mb']:,.1f} |")
    return "\n".join(lines)


def builds_text(sizes: list[dict]) -> str:
    lines = []
    for s in sizes:
        b = s.get("build") or {}
        if b.get("rows"):
            lines.append(
                f"- {s['label']}: built in this run: {b['rows']:,} rows in {b['seconds']:.0f} s "
                f"({b['rows'] / b['seconds']:,.0f} rows/s, {b['files']} files)"
            )
    return "\n".join(lines)


def machine() -> str:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor(),
    )  # fmt: skip
    mem = subprocess.run(["free", "-g"], capture_output=True, text=True).stdout.strip()
    return f"{os.cpu_count()} CPUs ({cpu}); Python {platform.python_version()}\n{mem}"


def report(sizes: list[dict], args) -> str:
    out = [
        f"## bench/scale.py, {datetime.now().astimezone():%Y-%m-%d %H:%M %Z}",
        "",
        "```",
        machine(),
        f"PostgreSQL: {sizes[0].get('postgres', '?')}",
        f"gunicorn {WORKERS} sync workers, DEBUG=0; {CONNECTIONS} connections; "
        f"{args.seconds} s per figure in {WINDOW} s windows alternating with /healthz",
        "```",
        "",
        "Runs above the demo data are re-labelled copies of the Liger CI rows, made for load "
        "testing only.",
        "",
        "### Ingest against COPY (one more copy of the 77,648 CI rows, rolled back)",
        "",
        "COPY: the ingested runs as rows of runs_run (no indexes); COPY CSV: the same CSV files "
        "as text columns. Peak RSS: the measuring process, build included.",
        "",
        ingest_table(sizes),
    ]
    built = builds_text(sizes)
    if built:
        out += ["", built]
    out += [
        "",
        "### Pages (ratio = req/s over /healthz req/s in the windows beside it; q = queries)",
        "",
        pages_table(sizes),
        "",
        "Pages: " + "; ".join(f"{name}: `{' '.join(urls)}`" for name, urls in sizes[-1]["urls"]),
        "",
        after_write_table(sizes),
        "",
        f"### Indexes on runs_run at {sizes[-1]['label']} ({sizes[-1]['runs']:,} runs)",
        "",
        indexes_table(sizes[-1]),
    ]
    for s in sizes:
        if s.get("explain"):
            out += ["", f"### EXPLAIN at {s['label']}", "", "```", s["explain"].rstrip(), "```"]
    return "\n".join(out) + "\n"


# One size, in a process of its own (Django set up on that size's database) ---------------


def server_env(url: str, page_cache: int, static_root: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "kernelindex.settings",
        "PYTHONPATH": str(REPO),
        "DATABASE_URL": url,
        "REDIS_URL": REDIS_URL,
        "CACHE_PREFIX": "ki-scale",
        "DEBUG": "0",
        "SECRET_KEY": "bench-scale-not-secret-" + "x" * 40,
        "ALLOWED_HOSTS": "127.0.0.1,testserver",
        "SECURE_SSL_REDIRECT": "0",
        "STATIC_ROOT": static_root,
        "PAGE_CACHE_SECONDS": str(page_cache),
        "LOG_LEVEL": "WARNING",
    }


def build(target: int, tmp: Path) -> dict:
    from django.core.management import call_command

    from runs.models import Publication, Run
    from runs.sources.pipeline import ingest

    rows = files = 0
    seconds = 0.0
    if not Run.objects.exists():
        print("  loading the demo data (manage.py demo --no-serve)", flush=True)
        start = time.perf_counter()
        call_command("demo", "--no-serve", stdout=io.StringIO())
        seconds += time.perf_counter() - start
        rows, files = Run.objects.count(), 0
    folders = ci_folders(CI_ROOT)
    sizes = {f: data_rows(CI_ROOT / f / "benchmark.csv") for f in folders}
    have = set(Publication.objects.filter(source__slug=CI_SLUG).values_list("slug", flat=True))
    copy = 0
    while (current := Run.objects.public().count()) < target:
        copy += 1
        todo = [f for f in folders if copy_commit(copy, f) not in have]
        picked, planned = [], 0
        for folder in todo:  # a partial copy for the last step: stop near the target
            if planned >= target - current:
                break
            picked.append(folder)
            planned += sizes[folder]
        if not picked:
            continue
        dest = tmp / f"copy-{copy}"
        relabel(CI_ROOT, dest, copy, picked)
        start = time.perf_counter()
        reports = ingest(source_slug=CI_SLUG, locations=[str(dest)])
        took = time.perf_counter() - start
        shutil.rmtree(dest)
        done = sum(r.rows for r in reports)
        rows, files, seconds = rows + done, files + len(reports), seconds + took
        print(
            f"  copy {copy}: {len(reports)} files, {done:,} rows in {took:.0f} s "
            f"({done / took:,.0f} rows/s); runs now "
            f"{current + sum(r.created for r in reports):,} of {target:,}",
            flush=True,
        )
    return {"rows": rows, "files": files, "seconds": seconds}


def measure_ingest(tmp: Path) -> dict:
    """Ingest one more re-labelled copy of all CI rows, then COPY the same runs into a scratch
    table shaped like runs_run, in one transaction rolled back at the end."""
    from django.db import connection, transaction

    from runs.models import Run
    from runs.sources.pipeline import ingest

    dest = tmp / "measure"
    relabel(CI_ROOT, dest, MEASURE_COPY)
    result: dict = {}

    class Rollback(Exception):
        pass

    try:
        with transaction.atomic():
            before = Run.objects.order_by("-id").values_list("id", flat=True).first() or 0
            start = time.perf_counter()
            reports = ingest(source_slug=CI_SLUG, locations=[str(dest)])
            result["seconds"] = time.perf_counter() - start
            result["rows"] = sum(r.rows for r in reports)
            fields = [f for f in Run._meta.concrete_fields if not f.primary_key]
            columns = ", ".join(
                connection.ops.quote_name(f.column) for f in [Run._meta.pk, *fields]
            )
            # The runs this ingest wrote, as COPY text, made before the clock starts: the floor
            # is the database's share of moving these rows in, not Python's.
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM runs_run WHERE id > %s", [before])
                copied = cursor.fetchone()[0]
                with cursor.copy(
                    f"COPY (SELECT {columns} FROM runs_run WHERE id > {int(before)}) TO STDOUT"
                ) as copy:
                    text = [bytes(chunk) for chunk in copy]
                # A plain table (written to the WAL like runs_run), without runs_run's indexes.
                cursor.execute("CREATE TABLE scale_copy_floor (LIKE runs_run)")
                start = time.perf_counter()
                with cursor.copy(f"COPY scale_copy_floor ({columns}) FROM STDIN") as copy:
                    for chunk in text:
                        copy.write(chunk)
                copy_s = time.perf_counter() - start
                # And the floor bench/ingest.py reports: the CSV bytes as text columns.
                files = sorted(dest.glob("*/benchmark.csv"))
                header = files[0].read_text().split("\n", 1)[0].split(",")
                cursor.execute(
                    "CREATE TABLE scale_copy_csv (" + ", ".join(f'"{h}" text' for h in header) + ")"
                )
                data = [path.read_bytes() for path in files]
                start = time.perf_counter()
                for chunk in data:
                    with cursor.copy(
                        "COPY scale_copy_csv FROM STDIN WITH (FORMAT csv, HEADER true)"
                    ) as copy:
                        copy.write(chunk)
                csv_s = time.perf_counter() - start
            result["copy_rows"] = copied
            result["copy_rows_per_s"] = copied / copy_s
            result["csv_copy_rows_per_s"] = result["rows"] / csv_s
            raise Rollback
    except Rollback:
        pass
    shutil.rmtree(dest)
    result["rows_per_s"] = result["rows"] / result["seconds"]
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


# Every URL pattern of the site is a page kind measured here (PAGE_KINDS: its figure's label and
# the pattern's name) or named in NOT_MEASURED with the reason; tests/bench/test_scale_bench.py
# fails for a pattern in neither, so a new page cannot be added without its figure.
PAGE_KINDS = [
    ("run page", "runs:detail"),
    ("run page, 3 others", "runs:detail"),
    ("run page, random run each request", "runs:detail"),
    ("Atom feed", "runs:feed"),
    ("source page", "runs:source"),
    ("ledger page", "runs:source-ledger"),
    ("GPU page", "runs:gpu"),
    ("benchmark page", "runs:benchmark"),
    ("group page", "runs:group"),
    ("browse, 2 filters", "runs:list"),
    ("browse, 2 filters, by median", "runs:list"),
    ("browse, no filter", "runs:list"),
    ("browse, search", "runs:list"),
    ("home", "runs:home"),
    ("API list", "api:runs"),
    ("API run detail", "api:run"),
    ("manifest .json", "runs:manifest"),
    ("changes page", "runs:source-changes"),
    ("claims page", "claims:source"),
    ("API changes", "api:changes"),
    ("API claims", "claims:api-source"),
    ("fidelity page", "fidelity:source"),
    ("API fidelity", "fidelity:api-source"),
    ("changes feed, source", "runs:feed-source-changes"),
    ("changes feed, benchmark", "runs:feed-benchmark-changes"),
    ("changes feed, cell", "runs:feed-cell-changes"),
    ("run history", "runs:history"),
    ("compare two runs", "runs:compare"),
    ("citation .bib", "runs:cite"),
    ("citation .csl.json", "runs:cite"),
    ("run job file", "reruns:job_file"),
    ("API root", "api:root"),
    ("API docs", "api:docs"),
    ("API schema", "api:schema"),
    ("API lookup", "api:run-lookup"),
    ("API benchmarks", "api:benchmarks"),
    ("API benchmark", "api:benchmark"),
    ("API groups", "api:groups"),
    ("API group", "api:group"),
    ("API sources", "api:sources"),
    ("API source", "api:source"),
    ("API environments", "api:environments"),
    ("API environment", "api:environment"),
]
NOT_MEASURED = {
    "runs:healthz": "the trivial view every figure is divided by",
    "api:export-csv": "a whole export, seconds long at 1M: bench/export.py measures it",
    "api:export-jsonl": "a whole export, seconds long at 1M: bench/export.py measures it",
    "reruns:runner_archive": "the runner's wheel, built once per process from no data",
    "reruns:request": "a form for signed-in readers (POST)",
    "favicon.ico": "a redirect to a static file",
    "admin/": "the admin, staff only",
    "accounts/": "sign-up, login and account pages (allauth)",
}
# The community's pages: the demo data has no account and no attestation to show, so there is
# no page of theirs to measure here.
NOT_MEASURED.update(
    {
        f"attestations:{name}": "signed-in or community pages; the demo data has no account"
        for name in (
            "attest",
            "report",
            "detail",
            "edit",
            "withdraw",
            "my_reports",
            "tokens",
            "token_revoke",
            "profile",
            "watching",
            "watch_new",
            "watch_stop",
            "unsubscribe",
        )
    }  # fmt: skip
)
NOT_MEASURED.update(
    {
        f"attestations-api:{name}": "community API; the demo data has no account"
        for name in (
            "attestation-list",
            "attestation-detail",
            "attestation-withdraw",
            "report-list",
        )
    }  # fmt: skip
)


def pick_pages() -> list[tuple[str, list[str]]]:
    """The URLs of each page kind of PAGE_KINDS, in its order; the same at every size (runs of
    the demo data only)."""
    from runs.models import Run

    public = Run.objects.public()
    example = public.select_related("group", "benchmark", "environment__gpu", "source").get(
        public_id=EXAMPLE
    )
    # One more run page from each source's original data, lowest public id first.
    others = []
    for slug in ("liger-kernel-bench", "liger-kernel-ci", "kernelbench"):
        runs = public.filter(source__slug=slug).exclude(public_id=EXAMPLE)
        if slug == CI_SLUG:
            runs = runs.filter(publication__slug__in=ci_folders(CI_ROOT))
        first = runs.order_by("public_id").values_list("public_id", flat=True).first()
        if first:
            others.append(f"/runs/{first}/")
    bench, gpu = example.benchmark.slug, example.environment.gpu.slug
    two = f"benchmark={bench}&gpu={gpu}"
    key = example.group.key.removeprefix("sha256:")
    # The example's group leader (or the next run, where the example leads) to compare with.
    rival = public.filter(group=example.group).exclude(pk=example.pk).order_by("rank", "id").first()
    run = f"/runs/{EXAMPLE}"
    urls = {
        "run page": [f"{run}/"],
        "run page, 3 others": others,
        "run page, random run each request": [f"/runs/{pid}/" for pid in random_runs()],
        "Atom feed": ["/feeds/runs.atom"],
        "source page": [f"/sources/{CI_SLUG}/"],
        "ledger page": [f"/sources/{CI_SLUG}/ledger/"],
        "GPU page": [f"/gpus/{gpu}/"],
        "benchmark page": [f"/benchmarks/{bench}/"],
        "group page": [f"/groups/{key[:16]}/"],
        "browse, 2 filters": [f"/runs/?{two}"],
        "browse, 2 filters, by median": [f"/runs/?{two}&ordering=median"],
        "browse, no filter": ["/runs/"],
        "browse, search": ["/runs/?q=rope"],
        "home": ["/"],
        "API list": ["/api/v1/runs/"],
        "API run detail": [f"/api/v1/runs/{EXAMPLE}/"],
        "manifest .json": [f"{run}.json"],
        "changes page": [f"/sources/{CI_SLUG}/changes/"],
        "claims page": [f"/sources/{CI_SLUG}/claims/"],
        "API changes": ["/api/v1/changes/"],
        "API claims": [f"/api/v1/sources/{CI_SLUG}/claims/"],
        "fidelity page": [f"/sources/{CI_SLUG}/fidelity/"],
        "API fidelity": [f"/api/v1/sources/{CI_SLUG}/fidelity/"],
        "changes feed, source": [f"/feeds/sources/{CI_SLUG}/changes.atom"],
        "changes feed, benchmark": [f"/feeds/benchmarks/{bench}/changes.atom"],
        "changes feed, cell": [f"/feeds/runs/{EXAMPLE}/changes.atom"],
        "run history": [f"{run}/history/"],
        "compare two runs": [f"{run}/compare/{rival.public_id}/"],
        "citation .bib": [f"{run}/cite.bib"],
        "citation .csl.json": [f"{run}/cite.csl.json"],
        "run job file": [f"{run}/job.json"],
        "API root": ["/api/v1/"],
        "API docs": ["/api/v1/docs/"],
        "API schema": ["/api/v1/schema/"],
        "API lookup": [
            f"/api/v1/runs/lookup/?source={example.source.slug}"
            f"&external_id={quote(example.external_id, safe='')}"
        ],
        "API benchmarks": ["/api/v1/benchmarks/"],
        "API benchmark": [f"/api/v1/benchmarks/{bench}/"],
        "API groups": ["/api/v1/groups/"],
        "API group": [f"/api/v1/groups/{key}/"],
        "API sources": ["/api/v1/sources/"],
        "API source": [f"/api/v1/sources/{CI_SLUG}/"],
        "API environments": ["/api/v1/environments/"],
        "API environment": [
            f"/api/v1/environments/{example.environment.digest.removeprefix('sha256:')}/"
        ],
    }
    pages = [(label, urls[label]) for label, _ in PAGE_KINDS]
    _check_kinds(pages)
    return pages


def _check_kinds(pages) -> None:
    """Each URL picked is of the pattern its kind names (a renamed route fails the bench)."""
    from urllib.parse import urlsplit

    from django.urls import resolve

    named = dict(PAGE_KINDS)
    for label, urls in pages:
        for url in urls[:3]:
            found = resolve(urlsplit(url).path).view_name
            if found != named[label]:
                raise RuntimeError(f"{label}: {url} is {found}, not {named[label]}")


def url_patterns() -> list[str]:
    """Every URL pattern of the site: its name (namespace:name), or for an unnamed pattern or
    an included set without a namespace (the admin, allauth), its route."""
    from django.urls import URLPattern, URLResolver, get_resolver

    found = []

    def walk(patterns, namespace: str, prefix: str) -> None:
        for p in patterns:
            route = prefix + str(p.pattern)
            if isinstance(p, URLResolver):
                if route in NOT_MEASURED:  # the admin, allauth: counted as one
                    found.append(route)
                    continue
                inner = ":".join(x for x in (namespace, p.namespace) if x)
                walk(p.url_patterns, inner, route)
            elif isinstance(p, URLPattern):
                found.append(f"{namespace}:{p.name}" if p.name and namespace else p.name or route)

    walk(get_resolver().url_patterns, "", "")
    return found


def random_runs(n: int = RANDOM_RUNS) -> list[str]:
    """Public ids of `n` current runs drawn at random from the whole index (a fixed seed, so
    each size draws its own sample the same way every time): readers arriving from links."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT setseed(0.19)")
        cursor.execute(
            "SELECT public_id FROM runs_run WHERE is_current ORDER BY random() LIMIT %s", [n]
        )
        return [row[0] for row in cursor.fetchall()]


def after_write() -> dict[str, dict]:
    """In process, page cache on: the first request of the home page, browse, the written run's
    page and another run's page after one write of each kind (a pending attestation and a job
    claim on the written run, an ingest of one small CI file), all pages warm before it. A
    first round on two other runs warms the process (templates of panels a run with activity
    shows), as in a running server; its figures are not kept. Each write is rolled back at the
    end (the database keeps its state)."""
    c, d, a, b = random_runs(4)
    _write_round(c, d)
    return _write_round(a, b)


def _write_round(a: str, b: str) -> dict[str, dict]:
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.test import Client
    from django.test.utils import override_settings

    from attestations.models import Attestation
    from reruns.models import RerunJob
    from runs.models import Run

    run = Run.objects.public().get(public_id=a)
    urls = {
        "home": "/",
        "browse": "/runs/",
        "written run": f"/runs/{a}/",
        "other run": f"/runs/{b}/",
    }

    def ingest_one(user) -> None:
        from runs.sources.pipeline import ingest

        with tempfile.TemporaryDirectory(prefix="ki-scale-one-") as tmp:
            relabel(CI_ROOT, Path(tmp), MEASURE_COPY - 1, [SMALL_CI_RUN])
            ingest(source_slug=CI_SLUG, locations=[tmp])

    writes = {
        "attestation (pending note)": lambda user: Attestation.objects.create(
            run=run, author=user, kind="note", body="bench"
        ),
        "job claim": lambda user: RerunJob.objects.filter(
            pk=RerunJob.objects.create(run=run, gpu_class="h100", state="queued").pk
        ).update(state="running", attempts=1, worker="bench:1"),
        "ingest of one 54-row CI file": ingest_one,
    }
    client, out = Client(), {}

    class Rollback(Exception):
        pass

    with override_settings(PAGE_CACHE_SECONDS=300):
        for name, write in writes.items():
            try:
                with transaction.atomic():
                    user = get_user_model().objects.create_user(f"bench-{name[:8]}")
                    for url in urls.values():
                        client.get(url)
                    write(user)
                    out[name] = {label: _timed(client, url) for label, url in urls.items()}
                    raise Rollback
            except Rollback:
                pass
    return out


def _timed(client, url: str) -> dict:
    start = time.perf_counter()
    response = client.get(url)
    return {"ms": (time.perf_counter() - start) * 1000, "cache": response.get("X-Page-Cache", "")}


def count_queries(pages) -> dict[str, dict]:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, override_settings

    client = Client()
    out = {}
    for name, urls in pages:
        # The second URL for the random-run row: the first one warmed the process, as in a
        # running server, and this one is a run the process has not shown yet.
        url, warm = (urls[1], urls[0]) if len(urls) > 20 else (urls[0], urls[0])
        with override_settings(PAGE_CACHE_SECONDS=0):
            client.get(warm)
            with CaptureQueriesContext(connection) as ctx:
                start = time.perf_counter()
                status = client.get(url).status_code
                ms = (time.perf_counter() - start) * 1000
            # Counted now: the next request's request_started empties the query log.
            uncached = len(ctx.captured_queries)
        with override_settings(PAGE_CACHE_SECONDS=300):
            client.get(url)  # stores the page
            with CaptureQueriesContext(connection) as ctx:
                client.get(url)
            cached = len(ctx.captured_queries)
        out[name] = {
            "uncached": uncached,
            "cached": cached,
            "status": status,
            "inprocess_ms": ms,
        }
    return out


class Server:
    def __init__(self, url: str, page_cache: int, static_root: str) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        gunicorn = str(Path(sys.executable).with_name("gunicorn"))
        self.proc = subprocess.Popen(
            [gunicorn, "kernelindex.wsgi", "-b", f"127.0.0.1:{self.port}", "-w", str(WORKERS),
             "--log-level", "warning"],
            cwd=REPO, env=server_env(url, page_cache, static_root), start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if self.get("/healthz")[0] == 200:
                    return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError("gunicorn did not answer /healthz within 60 s")

    def get(self, path: str) -> tuple[int, dict]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=CLIENT_TIMEOUT)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            response.read()
            return response.status, dict(response.getheaders())
        finally:
            conn.close()

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=30)


# Where each long list (the random runs) goes on: every request of a figure, in any window and
# in either mode, another run, so no run's page or kept parts are warm from an earlier one.
_long_lists: dict[tuple, tuple] = {}


def _next_path(paths: list[str]):
    """A function giving the next path of a long list, shared by threads and windows."""
    key = tuple(paths)
    if key not in _long_lists:
        _long_lists[key] = (itertools.cycle(paths), threading.Lock())
    cycle, lock = _long_lists[key]

    def take() -> str:
        with lock:
            return next(cycle)

    return take


def load(port: int, paths: list[str], seconds: float) -> dict:
    """CONNECTIONS threads GET the paths in turn until `seconds` have passed; the window ends
    when the last request issued has finished, so slow pages are counted whole."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def worker(offset: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=CLIENT_TIMEOUT)
        mine, bad, k = [], 0, offset
        take = _next_path(paths) if len(paths) > CONNECTIONS else None
        while time.perf_counter() < deadline:
            path = take() if take else paths[k % len(paths)]
            k += 1
            start = time.perf_counter()
            try:
                conn.request("GET", path)
                response = conn.getresponse()
                response.read()
                ok = response.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
                conn.close()
            mine.append(time.perf_counter() - start)
            bad += not ok
        conn.close()
        with lock:
            latencies.extend(mine)
            errors[0] += bad

    start = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(CONNECTIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"elapsed": time.perf_counter() - start, "latencies": latencies, "errors": errors[0]}


def interleaved(port: int, paths: list[str], seconds: float) -> dict:
    """Windows of the trivial view and of the page, alternating, until the page had `seconds`
    (a page slower than a window gets fewer, longer windows)."""
    page, trivial = [], []
    spent = 0.0
    while spent < seconds:
        trivial.append(load(port, ["/healthz"], WINDOW))
        page.append(load(port, paths, WINDOW))
        spent += page[-1]["elapsed"]
        if page[-1]["errors"]:
            drain(port)
    trivial.append(load(port, ["/healthz"], WINDOW))
    lat = sorted(x for w in page for x in w["latencies"])
    errors = sum(w["errors"] for w in page)
    ok = len(lat) - errors
    return {
        "rps": ok / sum(w["elapsed"] for w in page),
        "trivial_rps": sum(len(w["latencies"]) - w["errors"] for w in trivial)
        / sum(w["elapsed"] for w in trivial),
        "trivial_errors": sum(w["errors"] for w in trivial),
        "p50_ms": lat[len(lat) // 2] * 1000 if lat else None,
        "p99_ms": lat[min(len(lat) - 1, math.ceil(len(lat) * 0.99) - 1)] * 1000 if lat else None,
        "requests": len(lat),
        "errors": errors,
    }


def drain(port: int, limit: float = 60.0) -> None:
    """After requests the client gave up on, wait until the workers are free again: they are
    still rendering those pages (until gunicorn's timeout), and the next trivial window would
    measure that instead of the trivial view."""
    deadline, fast = time.monotonic() + limit, 0
    while fast < WORKERS + 1 and time.monotonic() < deadline:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=CLIENT_TIMEOUT)
        start = time.perf_counter()
        try:
            conn.request("GET", "/healthz")
            conn.getresponse().read()
        except (OSError, http.client.HTTPException):
            pass
        finally:
            conn.close()
        fast = fast + 1 if time.perf_counter() - start < 0.1 else 0


def measure_http(url: str, pages, seconds: float, static_root: str) -> list[dict]:
    rows = []
    for mode, page_cache in (("uncached", 0), ("cached", 300)):
        server = Server(url, page_cache, static_root)
        try:
            for name, paths in pages:
                for path in paths[:3]:  # warm the workers (and, cached, store the page)
                    for _ in range(WORKERS + 1):
                        status, headers = server.get(path)
                cache = headers.get("X-Page-Cache")
                if (mode == "cached") != (cache == "hit") and len(paths) <= 3:
                    print(f"  warning: {name} {mode}: X-Page-Cache {cache}", flush=True)
                result = interleaved(server.port, paths, seconds)
                result.update(page=name, mode=mode, status=status)
                rows.append(result)
                print(
                    f"  {mode:8} {name:30} {result['rps']:8.1f} req/s  "
                    f"trivial {result['trivial_rps']:6.0f}  p50 {result['p50_ms']:7.0f} ms  "
                    f"p99 {result['p99_ms']:7.0f} ms  errors {result['errors']}",
                    flush=True,
                )
        finally:
            server.stop()
    return rows


def indexes() -> tuple[list[tuple[str, float]], float]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, pg_relation_size(quote_ident(indexname)::regclass) / 1048576.0 "
            "FROM pg_indexes WHERE tablename = 'runs_run' ORDER BY 2 DESC, 1"
        )
        rows = [(name, float(mb)) for name, mb in cursor.fetchall()]
        cursor.execute("SELECT pg_relation_size('runs_run') / 1048576.0")
        return rows, float(cursor.fetchone()[0])


def explain() -> str:
    if not (REPO / "bench" / "explain.py").exists():
        return ""
    sys.path.insert(0, str(REPO / "bench"))
    import explain as plans  # bench/explain.py, where present

    buffer = io.StringIO()
    plans.explain_all(buffer)
    return buffer.getvalue()


def one_size(args) -> None:
    url = database_url(args.size)
    static_root = tempfile.mkdtemp(prefix="ki-scale-static-")
    os.environ.update(server_env(url, 0, static_root))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from runs.models import Run

    call_command("migrate", interactive=False, verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)
    from django.core.cache import cache

    # The bench's own cache (BENCH_REDIS_URL): nothing kept by an earlier run is measured.
    cache.clear()
    with tempfile.TemporaryDirectory(prefix="ki-scale-feeds-") as tmp:
        built = {} if args.skip_build else build(args.size, Path(tmp))
        if args.build_only:
            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE")
            print(f"  built: {Run.objects.public().count():,} current runs", flush=True)
            return
        with connection.cursor() as cursor:
            # Planner statistics as after a night of autovacuum, not as right after a bulk load.
            cursor.execute("VACUUM ANALYZE")
            cursor.execute("SHOW server_version")
            postgres = cursor.fetchone()[0]
        runs = Run.objects.public().count()
        print(f"  {runs:,} current runs", flush=True)
        # --pages measures those pages only: no ingest and no first requests after a write.
        ingest_result = {} if args.pages else measure_ingest(Path(tmp))
    if ingest_result:
        print(
            f"  ingest {ingest_result['rows_per_s']:,.0f} rows/s, "
            f"COPY {ingest_result['copy_rows_per_s']:,.0f} rows/s",
            flush=True,
        )
    pages = pick_pages()
    if args.pages:
        pages = [(label, urls) for label, urls in pages if label in args.pages.split(";")]
    queries = count_queries(pages)
    writes = {} if args.pages else after_write()
    for write, figures in writes.items():
        print(f"  after one {write}: " + ", ".join(
            f"{label} {f['ms']:.0f} ms ({f['cache']})" for label, f in figures.items()
        ), flush=True)  # fmt: skip
    http_rows = measure_http(url, pages, args.seconds, static_root)
    for row in http_rows:
        q = queries[row["page"]]
        row["queries"] = q[row["mode"]]
        row["inprocess_ms"] = q["inprocess_ms"]
    index_rows, table_mb = indexes()
    result = {
        "label": size_label(args.size) if args.size != DEMO else "80k",
        "target": args.size,
        "runs": runs,
        "postgres": postgres,
        "build": built,
        "ingest": ingest_result,
        "pages": http_rows,
        "queries": queries,
        "after_write": writes,
        "urls": [(name, paths[:3]) for name, paths in pages],
        "indexes": index_rows,
        "table_mb": table_mb,
        "explain": explain(),
    }
    shutil.rmtree(static_root, ignore_errors=True)
    Path(args.out).write_text(json.dumps(result, indent=1))


# Orchestration (no Django here: each size runs in its own process) ------------------------


def database_ensure(n: int, template: int | None, skip_build: bool) -> None:
    import psycopg

    name = database_url(n).rsplit("/", 1)[1]
    with psycopg.connect(f"{PG_ROOT}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists:
            return
        if skip_build:
            sys.exit(f"--skip-build: database {name} does not exist")
        if template is None:
            conn.execute(f'CREATE DATABASE "{name}"')
        else:
            # A copy of the demo database, then grown by ingest: the demo is loaded once.
            source = database_url(template).rsplit("/", 1)[1]
            print(f"creating {name} as a copy of {source}", flush=True)
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{source}"')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default="1m", help="the large size (default 1m)")
    parser.add_argument("--sizes", help="comma-separated sizes, first 80k (default 80k,RUNS)")
    parser.add_argument(
        "--skip-build", action="store_true", help="measure the databases as they are"
    )
    parser.add_argument(
        "--build-only", action="store_true", help="build the databases, measure nothing"
    )
    parser.add_argument(
        "--pages", help="labels of PAGE_KINDS, separated by ;: those only, no ingest or writes"
    )
    parser.add_argument("--seconds", type=float, default=6.0, help="page time per figure")
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)  # one size, in a child
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.size:
        one_size(args)
        return
    sizes = [parse_size(s) for s in (args.sizes or f"80k,{args.runs}").split(",")]
    if sizes[0] != DEMO:
        sys.exit("the first size is the demo data: 80k")
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    for n in sizes:
        database_ensure(n, None if n == DEMO else DEMO, args.skip_build)
        out = OUT / f"scale-{size_label(n)}.json"
        print(f"size {size_label(n)}: {database_url(n)}", flush=True)
        command = [sys.executable, __file__, "--size", str(n), "--out", str(out),
                   "--seconds", str(args.seconds)] + (["--skip-build"] if args.skip_build else [])  # fmt: skip
        command += ["--pages", args.pages] if args.pages else []
        subprocess.run(command + (["--build-only"] if args.build_only else []), check=True)
        if args.build_only:
            continue
        results.append(json.loads(out.read_text()))
    if args.build_only:
        return
    text = report(results, args)
    (OUT / "scale-report.md").write_text(text)
    print("\n" + text)


if __name__ == "__main__":
    main()

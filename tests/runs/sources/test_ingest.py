from __future__ import annotations

import csv
import http.server
import shutil
import threading
from datetime import datetime, timedelta
from functools import partial

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from runs.models import ComparisonGroup, ImportRecord, Publication, Run
from runs.sources.parsers import IngestError
from runs.sources.pipeline import ingest, public_id_for
from tests.conftest import EXAMPLE_EXTERNAL_ID, LIGER_CI, LIGER_CSV

pytestmark = pytest.mark.django_db


def test_bench_csv_gives_runs_groups_and_ranks(liger_bench):
    (report,) = liger_bench
    assert (report.rows, report.created, report.revised, report.unchanged) == (2448, 2448, 0, 0)
    assert Run.objects.count() == 2448
    assert ComparisonGroup.objects.count() == 1082
    assert not Run.objects.filter(rank__isnull=True).exists()
    example = Run.objects.get(external_id=EXAMPLE_EXTERNAL_ID)
    assert example.rank == 2 and example.group.size == 2
    leader = example.group.runs.get(rank=1)
    assert leader.implementation.provider_key == "liger"
    assert leader.median == 117088


def test_second_ingest_creates_and_changes_nothing(liger_bench, capsys):
    before = list(Run.objects.order_by("pk").values_list("pk", "public_id", "digest", "rank"))
    call_command("ingest", "liger-kernel-bench", str(LIGER_CSV), "--no-progress")
    out = capsys.readouterr().out
    assert "0 created, 0 revised, 2448 unchanged (nothing changed)" in out
    after = list(Run.objects.order_by("pk").values_list("pk", "public_id", "digest", "rank"))
    assert before == after
    assert ImportRecord.objects.count() == 2


def test_public_id_is_derived_from_upstream_identity(liger_bench):
    example = Run.objects.get(external_id=EXAMPLE_EXTERNAL_ID)
    assert example.public_id == public_id_for("liger-kernel-bench", EXAMPLE_EXTERNAL_ID)
    Run.objects.all().delete()
    ComparisonGroup.objects.all().delete()
    ingest(source_slug="liger-kernel-bench", locations=[str(LIGER_CSV)])
    assert Run.objects.get(external_id=EXAMPLE_EXTERNAL_ID).public_id == example.public_id


def test_public_id_collision_takes_the_next_deterministic_id(tmp_path, monkeypatch):
    # Force every identity onto the same first choice; ids must stay unique and repeatable.
    import runs.sources.pipeline as services

    real = services.public_id_for
    monkeypatch.setattr(
        services, "public_id_for", lambda s, e, attempt=0: real("x", "same", attempt)
    )
    path = tmp_path / "all_benchmark_data.csv"
    lines = LIGER_CSV.read_bytes().split(b"\r\n")
    path.write_bytes(b"\r\n".join(lines[:4]) + b"\r\n")
    ingest(source_slug="liger-kernel-bench", locations=[str(path)])
    ids = list(Run.objects.order_by("pk").values_list("public_id", flat=True))
    assert ids == [real("x", "same", n) for n in range(3)]


def test_changed_upstream_values_become_a_revision(tmp_path, liger_bench):
    text = LIGER_CSV.read_bytes().decode()
    changed = text.replace("0.38553598523139954", "0.386", 1)  # inside its p20..p80
    path = tmp_path / "all_benchmark_data.csv"
    path.write_text(changed, newline="")
    (report,) = ingest(source_slug="liger-kernel-bench", locations=[str(path)])
    assert (report.created, report.revised, report.unchanged) == (0, 1, 2447)
    revisions = Run.objects.filter(external_id=EXAMPLE_EXTERNAL_ID).order_by("revision")
    old, new = revisions
    assert (old.revision, old.is_current, old.median, old.rank) == (1, False, 385536, None)
    assert (new.revision, new.is_current, new.median) == (2, True, 386000)
    assert new.public_id == old.public_id and new.digest != old.digest
    assert new.rank == 2  # still behind liger's 117 µs
    assert Run.objects.public().count() == 2448


def test_malformed_file_writes_nothing(tmp_path):
    good = LIGER_CSV.read_bytes().decode().split("\r\n")
    good[5] = good[5].replace("speed", "speeed")
    path = tmp_path / "all_benchmark_data.csv"
    path.write_text("\r\n".join(good), newline="")
    with pytest.raises(IngestError) as excinfo:
        ingest(source_slug="liger-kernel-bench", locations=[str(path)])
    assert excinfo.value.problems == [(6, "unknown metric 'speeed'")]
    assert Run.objects.count() == 0 and Publication.objects.count() == 0


def test_command_reports_file_and_line(tmp_path):
    path = tmp_path / "bad.csv"
    text = LIGER_CSV.read_bytes().decode().split("\r\n")
    text[2] = text[2].replace("0.8101439476013184", "n/a")
    path.write_text("\r\n".join(text), newline="")
    with pytest.raises(CommandError, match=r"bad.csv: line 3: y_value_50 is not a number"):
        call_command("ingest", "liger-kernel-bench", str(path), "--no-progress")
    with pytest.raises(CommandError, match="no such file"):
        call_command("ingest", "liger-kernel-bench", str(tmp_path / "missing.csv"))


def test_a_bad_file_among_several_leaves_the_good_ones_whole(tmp_path):
    good = tmp_path / "02bac05"
    bad = tmp_path / "0701bab"
    shutil.copytree(LIGER_CI / "02bac05", good)
    bad.mkdir()
    (bad / "benchmark.csv").write_bytes(
        (LIGER_CI / "0701bab" / "benchmark.csv").read_bytes().replace(b"NVIDIA", b"ACME", 1)
    )
    with pytest.raises(IngestError, match="not in the catalogue"):
        ingest(source_slug="liger-kernel-ci", locations=[str(good), str(bad)])
    assert set(Publication.objects.values_list("slug", flat=True)) == {"02bac05"}
    rows = (LIGER_CI / "02bac05" / "benchmark.csv").read_bytes().count(b"\r\n") - 1
    assert Run.objects.count() == rows


def test_ci_runs_rank_inside_each_run_and_share_cells(tmp_path):
    folders = ["d5648bf-v0.6.3", "0a62700-v0.6.4"]
    reports = ingest(source_slug="liger-kernel-ci", locations=[str(LIGER_CI / f) for f in folders])
    assert [r.publication for r in reports] == folders
    release = Publication.objects.get(slug="0a62700-v0.6.4")
    assert (release.upstream_commit, release.release) == ("0a62700", "v0.6.4")
    run = Run.objects.filter(publication=release, implementation__provider_key="liger").first()
    assert run.external_id.startswith("0a62700-v0.6.4/")
    assert run.labels["upstream_commit"] == "0a62700" and run.labels["release"] == "v0.6.4"
    assert run.implementation.revision == "0a62700"
    # Groups never mix CI runs; the same cell across runs shares a cell key. (A resolver shared
    # by the files of one ingest once reused the first run's groups for the later ones.)
    assert not ComparisonGroup.objects.exclude(publication__in=Publication.objects.all()).exists()
    assert not Run.objects.exclude(group__publication=F("publication")).exists()
    for group in ComparisonGroup.objects.filter(publication=release)[:50]:
        assert set(group.runs.values_list("publication_id", flat=True)) == {release.pk}
        ranks = sorted(group.runs.values_list("rank", flat=True))
        assert ranks[0] == 1
    # A Liger cell's history follows it across commits, though each commit is its own
    # implementation revision.
    older = Publication.objects.get(slug="d5648bf-v0.6.3")
    shared = Run.objects.filter(
        publication=release,
        implementation__provider_key="liger",
        group__cell_key__in=ComparisonGroup.objects.filter(publication=older).values("cell_key"),
    ).first()
    history = list(Run.objects.history_of(shared))
    assert [r.publication.slug for r in history] == folders
    assert {r.implementation.revision for r in history} == {"d5648bf", "0a62700"}
    assert history[-1] == shared


def test_ci_root_folder_follows_commit_order(tmp_path):
    root = tmp_path / "liger-ci"
    root.mkdir()
    for name in ["c1bdc24", "b6ed735"]:
        shutil.copytree(LIGER_CI / name, root / name)
    (root / "commits.txt").write_text("b6ed735\nc1bdc24\n")
    reports = ingest(source_slug="liger-kernel-ci", locations=[str(root)])
    assert [r.publication for r in reports] == ["b6ed735", "c1bdc24"]
    assert list(Publication.objects.order_by("sequence").values_list("slug", flat=True)) == [
        "b6ed735",
        "c1bdc24",
    ]


def test_import_from_http_url(tmp_path):
    shutil.copy(LIGER_CSV, tmp_path / "all_benchmark_data.csv")
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/all_benchmark_data.csv"
        (report,) = ingest(source_slug="liger-kernel-bench", locations=[url])
    finally:
        server.shutdown()
    assert report.created == 2448
    assert Publication.objects.get().slug == "all_benchmark_data.csv"
    assert ImportRecord.objects.get().location == url


def test_unknown_source_is_refused():
    with pytest.raises(IngestError, match="unknown source"):
        ingest(source_slug="nope", locations=[str(LIGER_CSV)])


def test_queries_per_file_do_not_grow_with_its_rows(tmp_path):
    # The same 40 rows, then those and three copies a second later each (other runs, same
    # documents and groups): the second file has four times the runs and costs the same
    # queries. Inserts are one COPY on PostgreSQL; elsewhere the backend's parameter limit
    # splits a bulk insert into batches, so an INSERT counts once per table.
    with LIGER_CSV.open(newline="") as f:
        header, *rows = list(csv.reader(f))[:41]
    stamp = header.index("timestamp")

    def later(row: list[str], seconds: int) -> list[str]:
        moment = datetime.strptime(row[stamp], "%Y-%m-%d %H:%M:%S") + timedelta(seconds=seconds)
        return [*row[:stamp], f"{moment:%Y-%m-%d %H:%M:%S}", *row[stamp + 1 :]]

    counts = []
    for copies in (1, 4):
        path = tmp_path / str(copies) / "all_benchmark_data.csv"
        path.parent.mkdir()
        with path.open("w", newline="") as f:
            csv.writer(f).writerows([header, *(later(r, n) for n in range(copies) for r in rows)])
        with transaction.atomic(), CaptureQueriesContext(connection) as queries:
            (report,) = ingest(source_slug="liger-kernel-bench", locations=[str(path)])
            transaction.set_rollback(True)  # the next file starts from the same empty tables
        inserts = {q["sql"].split("(", 1)[0] for q in queries if q["sql"].startswith("INSERT")}
        others = [q for q in queries if not q["sql"].startswith("INSERT")]
        counts.append((report.created, len(others) + len(inserts)))
    (small, small_queries), (large, large_queries) = counts
    assert (small, large) == (40, 160)
    assert large_queries == small_queries

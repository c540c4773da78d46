"""Bad input gets a clear error naming file and line, never a traceback; nothing is written."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from runs.models import ImportRecord, Publication, Run
from runs.sources.base import IngestError
from runs.sources.pipeline import ingest
from tests.conftest import LIGER_CSV

pytestmark = pytest.mark.django_db

HEADER, FIRST, SECOND = LIGER_CSV.read_bytes().decode().split("\r\n")[:3]


def _csv(tmp_path, *rows: str, name: str = "all_benchmark_data.csv"):
    path = tmp_path / name
    path.write_text("\r\n".join([HEADER, *rows]) + "\r\n", newline="")
    return path


def _refused(path, match: str, source: str = "liger-kernel-bench") -> None:
    with pytest.raises(IngestError, match=match):
        ingest(source_slug=source, locations=[str(path)])
    with pytest.raises(CommandError, match=match):
        call_command("ingest", source, str(path), "--no-progress")
    assert not Run.objects.exists() and not ImportRecord.objects.exists()
    assert not Publication.objects.exists()


def test_same_rows_under_another_file_name_are_unchanged(tmp_path):
    ingest(source_slug="liger-kernel-bench", locations=[str(_csv(tmp_path, FIRST, SECOND))])
    renamed = _csv(tmp_path, FIRST, SECOND, name="copy.csv")
    (report,) = ingest(source_slug="liger-kernel-bench", locations=[str(renamed)])
    assert (report.created, report.revised, report.unchanged) == (0, 0, 2)
    assert Run.objects.count() == 2


def test_kernel_name_longer_than_a_benchmark_slug(tmp_path):
    name = FIRST.split(",", 1)[0]
    _refused(
        _csv(tmp_path, FIRST.replace(name, "k" * 81, 1)), "line 2: benchmark is longer than 80"
    )


def test_field_over_the_csv_limit(tmp_path):
    _refused(
        _csv(tmp_path, FIRST, FIRST.replace("{", "{" + " " * 140_000, 1)),
        "line 3: not a readable CSV row",
    )


def test_nul_byte(tmp_path):
    _refused(_csv(tmp_path, FIRST, SECOND.replace(",", ",\x00", 1)), "line 3: a NUL byte")


def test_value_out_of_range(tmp_path):
    # ms: 1e19 ns does not fit a 64-bit column; 1e16 ns does, but has no canonical JSON form.
    for value in ("1e13", "1e10"):
        cells = FIRST.split(",")
        cells[8] = value
        _refused(_csv(tmp_path, ",".join(cells)), "line 2: a value is out of range")


def test_zero_and_negative_medians(tmp_path):
    for value in ("0", "-0.5"):
        cells = FIRST.split(",")
        cells[8] = value
        _refused(_csv(tmp_path, ",".join(cells)), "line 2: the median must be positive")


def test_header_only_file(tmp_path):
    _refused(_csv(tmp_path), "no records in the file")


def test_ci_commit_listed_without_its_csv(tmp_path):
    run = tmp_path / "abc1234"
    run.mkdir()
    _csv(run, FIRST, name="benchmark.csv")
    (tmp_path / "commits.txt").write_text("abc1234\ndef5678\n")
    _refused(
        tmp_path, "commits.txt names 1 run.* without benchmark.csv: def5678", "liger-kernel-ci"
    )


def test_quantiles_out_of_order(tmp_path):
    """p20 > median > p80 is refused with its line, as the community form refuses it."""
    cells = FIRST.split(",")
    median = float(cells[8])
    cells[9], cells[10] = str(median * 1.5), str(median * 0.5)
    _refused(
        _csv(tmp_path, SECOND, ",".join(cells)),
        r"line 3: p20 \d+, median \d+, p80 \d+ ns are not in order \(p20 <= median <= p80\)",
    )
    cells = FIRST.split(",")
    cells[10] = "-1"
    _refused(_csv(tmp_path, ",".join(cells)), "line 2: the p80 must be positive, got -1000000")


def test_a_median_that_overflows_when_scaled(tmp_path):
    cells = FIRST.split(",")
    cells[8] = "1e305"
    _refused(_csv(tmp_path, ",".join(cells)), r"line 2: y_value_50 is out of range: 1e\+305")

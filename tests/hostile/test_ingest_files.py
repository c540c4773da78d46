"""Hostile upstream files: each is refused by `manage.py ingest` with a message naming the file
and line, never a traceback, and nothing is written. Run against PostgreSQL in CI, where a
NUL or an overlong name is a database error rather than a silent truncation."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from runs.models import ImportRecord, Publication, Run
from tests.conftest import KERNELBENCH, LIGER_CSV

pytestmark = pytest.mark.django_db

HEADER, FIRST = LIGER_CSV.read_bytes().decode().split("\r\n")[:2]
CONFIG = 11  # extra_benchmark_config_str
X_VALUE = 7


def _row(column: int, value: str) -> str:
    import csv
    import io

    cells = next(csv.reader(io.StringIO(FIRST)))
    cells[column] = value
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(cells)
    return out.getvalue()


def _refused(source: str, path, match: str) -> None:
    with pytest.raises(CommandError, match=match):
        call_command("ingest", source, str(path), "--no-progress")
    assert not Run.objects.exists() and not Publication.objects.exists()
    assert not ImportRecord.objects.filter(outcome__in=ImportRecord.APPLIED).exists()


def _csv(tmp_path, row: str, name: str = "all_benchmark_data.csv"):
    path = tmp_path / name
    path.write_text(f"{HEADER}\r\n{row}\r\n", newline="")
    return path


@pytest.mark.parametrize(
    "config, match",
    [
        ("[" * 5000 + "]" * 5000, "nested deeper than 32 levels"),
        ('{"hidden": ' + "[" * 5000 + "]" * 5000 + "}", "nested deeper than 32 levels"),
        ('{"hidden": 9007199254740993}', r"the integer 9007199254740993 is beyond 2\^53 - 1"),
        ('{"hidden": 1' + "0" * 5000 + "}", r"is beyond 2\^53 - 1"),
        ('{"hidden": NaN}', "NaN is not a number JSON can carry"),
        ('{"hidden": Infinity}', "Infinity is not a number JSON can carry"),
        ('{"hidden": 1e400}', "the number 1e400 is too large"),
        ('{"hidden": "a\\u0000b"}', "a NUL character is not allowed"),
    ],
    ids=["deep", "deep value", "2^53+1", "5000 digits", "NaN", "Infinity", "1e400", "NUL"],
)
def test_hostile_config_json(tmp_path, config, match):
    _refused("liger-kernel-bench", _csv(tmp_path, _row(CONFIG, config)), "line 2: .*" + match)


@pytest.mark.parametrize("x_value", ["nan", "inf", "-inf", "1e400", "9007199254740994"])
def test_hostile_x_value(tmp_path, x_value):
    _refused(
        "liger-kernel-bench",
        _csv(tmp_path, _row(X_VALUE, x_value)),
        "line 2: a workload parameter is refused",
    )


def test_binary_commits_txt(tmp_path):
    run = tmp_path / "abc1234"
    run.mkdir()
    _csv(run, FIRST, name="benchmark.csv")
    (tmp_path / "commits.txt").write_bytes(b"\xff\xfe\x00abc1234\n\x80\x81")
    _refused("liger-kernel-ci", tmp_path, r"commits.txt: line 0: not UTF-8 text")


@pytest.mark.parametrize("length", [121, 255])
def test_a_file_name_longer_than_a_publication_name(tmp_path, length):
    name = "a" * (length - 4) + ".csv"
    _refused(
        "liger-kernel-bench",
        _csv(tmp_path, FIRST, name=name),
        "the publication taken from the file or folder name is longer than 120 characters",
    )


def test_a_ci_folder_name_longer_than_a_commit(tmp_path):
    run = tmp_path / ("c" * 60)
    run.mkdir()
    _csv(run, FIRST, name="benchmark.csv")
    _refused(
        "liger-kernel-ci",
        run,
        "the upstream commit taken from the file or folder name is longer than 40 characters",
    )


@pytest.mark.parametrize(
    "timing, match",
    [
        ("[" * 100_000 + "]" * 100_000, "nested deeper than 32 levels"),
        ('{"mean": 1e400}', "the number 1e400 is too large"),
        ('{"mean": NaN}', "NaN is not a number"),
        ('{"mean": 1' + "0" * 400 + "}", r"beyond 2\^53 - 1"),
        ('{"mean": 1e305, "std": 0, "min": 1e305, "max": 1e305}', "mean is out of range"),
        ('{"mean": 2.0, "std": 0.1, "min": 3.0, "max": 4.0}', "are not in order"),
    ],
    ids=["deep", "1e400", "NaN", "400 digits", "1e305 ms", "min > mean"],
)
def test_hostile_kernelbench_json(tmp_path, timing, match):
    real = json.loads((KERNELBENCH / "H100_Modal" / "baseline_time_torch.json").read_text())
    problem = next(iter(real["level1"]))
    folder = tmp_path / "H100_Modal"
    folder.mkdir()
    text = json.dumps({"level1": {problem: "TIMING"}}).replace('"TIMING"', timing)
    (folder / "baseline_time_torch.json").write_text(text)
    _refused("kernelbench", folder, match)

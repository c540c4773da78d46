"""Upstream names that a spreadsheet would run as formulas: the CSV export neutralises every
text cell that starts with = + - @, a tab or a CR (OWASP's rule); the JSONL keeps them exact.
The names go in through the real ingest path, as an upstream file would bring them."""

from __future__ import annotations

import csv
import io
import json

import pytest

from runs.read import exports
from runs.sources.pipeline import ingest
from tests.conftest import LIGER_CSV

# Ingest strips the cells, so a tab or CR start cannot come from a Liger file (the unit test
# below covers them).
FORMULAS = ["=1+2", '=HYPERLINK("http://evil.example","x")', "+1+2", "-1+2", "@SUM(1+1)"]
HEADER, FIRST = LIGER_CSV.read_bytes().decode().split("\r\n")[:2]


@pytest.fixture
def hostile(db, tmp_path):
    cells = next(csv.reader(io.StringIO(FIRST)))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(HEADER.split(","))
    for name in FORMULAS:
        writer.writerow([name, *cells[1:]])
    path = tmp_path / "all_benchmark_data.csv"
    path.write_text(out.getvalue(), newline="")
    ingest(source_slug="liger-kernel-bench", locations=[str(path)])


def _csv_rows(client) -> list[dict]:
    body = b"".join(client.get("/api/v1/runs/export.csv").streaming_content)
    assert exports.verify("csv", body) is not None  # still a whole, verifiable file
    records = list(csv.reader(io.StringIO(body.decode())))
    return [dict(zip(records[0], r, strict=True)) for r in records[1:-1]]


def test_csv_cells_that_start_a_formula_are_neutralised(client, hostile):
    rows = _csv_rows(client)
    assert sorted(r["benchmark"] for r in rows) == sorted("'" + name for name in FORMULAS)
    for row in rows:
        for column, value in row.items():
            assert not value.startswith(exports.FORMULA_STARTS), (column, value)
    # Numbers are numbers still.
    assert all(int(r["median"]) > 0 for r in rows)


def test_jsonl_keeps_the_exact_names(client, hostile):
    body = b"".join(client.get("/api/v1/runs/export.jsonl").streaming_content)
    assert exports.verify("jsonl", body) is not None
    lines = [json.loads(line) for line in body.decode().splitlines()[:-1]]
    assert sorted(r["benchmark"] for r in lines) == sorted(FORMULAS), lines


def test_neutralised_leaves_numbers_and_plain_text():
    assert exports.neutralised(-5) == -5
    assert exports.neutralised("rope") == "rope"
    assert exports.neutralised("a=b") == "a=b"
    for start in ("=", "+", "-", "@", "\t", "\r"):
        assert exports.neutralised(start + "1+2") == "'" + start + "1+2"

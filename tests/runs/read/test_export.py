"""The bulk export (/api/v1/runs/export.csv|jsonl and manage.py export): every export ends
with a trailer that verifies, a cut-short one is recognisably cut short, and a set too large
for one part arrives whole as parts that each stop within the worker timeout."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.models import Run
from runs.read import exports

URL = "/api/v1/runs/export.{fmt}"
FILTER = {"benchmark": "llama4_rope"}


def _body(response) -> bytes:
    assert response.status_code == 200
    return b"".join(response.streaming_content)


@pytest.mark.parametrize("fmt", exports.FORMATS)
def test_a_whole_export_ends_with_a_trailer_that_verifies(client, liger_bench, fmt):
    expected = Run.objects.public().filter(benchmark__slug="llama4_rope").count()
    body = _body(client.get(URL.format(fmt=fmt), FILTER))
    trailer = exports.verify(fmt, body)
    assert trailer == exports.Trailer("end", expected, trailer.sha256)
    # The digest covers every byte before the trailer line: change one and it no longer holds.
    altered = body.replace(b"llama4_rope", b"llama4_ropf", 1)
    assert exports.verify(fmt, altered) is None
    if fmt == "csv":
        # A CSV reader still reads the rows; the trailer is one more line of a single field.
        *rows, last = csv.reader(io.StringIO(body.decode()))
        assert len(rows) == expected + 1 and rows[0] == exports.HEADER
        assert last == [f"# end rows={expected} sha256={trailer.sha256}"]


@pytest.mark.parametrize("fmt", exports.FORMATS)
def test_an_export_cut_mid_stream_has_no_trailer(client, liger_bench, monkeypatch, fmt):
    """What the client holds when the worker is killed mid-stream (gunicorn's timeout at about
    650k rows of a million): a 200 and the bytes sent so far, and no trailer."""
    monkeypatch.setattr(exports, "CHUNK_ROWS", 500)
    walk = exports.rows

    def killed(queryset, **kwargs):
        for n, row in enumerate(walk(queryset, **kwargs)):
            if n == 1750:
                raise SystemExit("worker timeout")  # what gunicorn's SIGABRT handler raises
            yield row

    monkeypatch.setattr(exports, "rows", killed)
    response = client.get(URL.format(fmt=fmt))
    assert response.status_code == 200
    received = b""
    with pytest.raises(SystemExit):
        for block in response.streaming_content:
            received += block
    assert received.count(b"\n") >= 1500  # three chunks went out before the kill
    assert exports.verify(fmt, received) is None
    assert b"# end" not in received and b'"export"' not in received


@pytest.mark.parametrize("fmt", exports.FORMATS)
def test_parts_past_their_budget_link_the_next_and_add_up_to_the_whole(
    client, liger_bench, settings, monkeypatch, fmt
):
    settings.EXPORT_STREAM_SECONDS = 0  # every part stops at its first chunk boundary
    monkeypatch.setattr(exports, "CHUNK_ROWS", 1000)
    url, params, parts, ids = URL.format(fmt=fmt), {}, [], []
    while True:
        body = _body(client.get(url, params))
        trailer = exports.verify(fmt, body)
        assert trailer is not None, body[-300:]
        parts.append(trailer)
        ids += [row[0] for row in _records(fmt, body)]
        if trailer.kind == "end":
            break
        url, _, query = trailer.next.removeprefix("http://testserver").partition("?")
        params = dict(p.split("=") for p in query.split("&"))
    assert [p.kind for p in parts] == ["partial", "partial", "end"]
    assert [p.rows for p in parts] == [1000, 1000, 448]
    assert sorted(ids) == sorted(Run.objects.public().values_list("public_id", flat=True))


def _records(fmt: str, body: bytes) -> list[list]:
    lines = body.decode().splitlines()[:-1]
    if fmt == "csv":
        return list(csv.reader(lines))[1:]
    return [[re.search(r'"public_id": "(\w+)"', line)[1]] for line in lines]


def test_the_walk_is_keyset_chunks_not_offset(liger_bench, monkeypatch):
    monkeypatch.setattr(exports, "CHUNK_ROWS", 500)
    queryset, after, _ = exports.filtered({})
    with CaptureQueriesContext(connection) as ctx:
        rows = list(exports.rows(queryset, after=after))
    walks = [q["sql"] for q in ctx.captured_queries if 'FROM "runs_run"' in q["sql"]]
    assert len(rows) == 2448 and len(walks) == 5  # ceil(2448 / 500): memory holds one chunk
    assert all("OFFSET" not in sql and "LIMIT 500" in sql for sql in walks)
    assert all('"runs_run"."id" >' in sql for sql in walks)


def test_manage_export_writes_a_whole_file(liger_bench, tmp_path):
    out = tmp_path / "runs.jsonl"
    call_command("export", "benchmark=llama4_rope", "--format", "jsonl", "--out", str(out))
    expected = Run.objects.public().filter(benchmark__slug="llama4_rope").count()
    assert exports.verify("jsonl", out.read_bytes()).rows == expected
    assert not (tmp_path / "runs.jsonl.partial").exists()
    for bad in (["benchmark"], ["colour=red"], ["metric=speed"]):
        with pytest.raises(CommandError):
            call_command("export", *bad, "--out", str(out))

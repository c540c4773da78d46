"""The bulk export: every current run of a filtered set as CSV or JSON lines, ending with a
trailer that proves the file arrived whole.

A streamed response that dies half-way (a worker killed by its timeout, a dropped
connection) still reaches the client as a 200 whose body simply stops. So the last line of
every export says how many rows came before it and the SHA-256 of every byte before it:

    CSV     # end rows=2448 sha256=<64 hex>
    JSONL   {"export": "end", "rows": 2448, "sha256": "<64 hex>"}

No trailer, or one whose digest does not match, means the file is not whole (`verify`).

A streamed part stops by itself before the server's worker timeout (`budget` seconds) and
then ends with a `partial` trailer naming the URL of the next part instead of `end`:

    # partial rows=61000 sha256=<64 hex> next=https://.../export.csv?benchmark=...&after=123456
    {"export": "partial", "rows": 61000, "sha256": "<64 hex>", "next": "https://..."}

Rows are walked in primary-key order, one short query per chunk (`id > last seen`), so any
size of export holds no transaction open between chunks, keeps one chunk in memory, and can
resume after the last id of a part. `manage.py export` writes a whole file with no budget.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from operator import attrgetter

from django.http import QueryDict

from runs.models import Run
from runs.read import catalogue
from runs.read.filters import RunFilter

# (column, run field, catalogue table, attribute of its row): one list, so a column can never
# drift from the value under it. Catalogue values come from runs.read.catalogue, not from joins:
# only the two large relations (workload, group) are joined.
COLUMNS: list[tuple[str, str, str | None, str | None]] = [
    ("public_id", "public_id", None, None),
    ("revision", "revision", None, None),
    ("benchmark", "benchmark_id", "benchmark", "slug"),
    ("implementation", "implementation_id", "implementation", "provider_key"),
    ("workload", "workload__label", None, None),
    ("gpu", "environment_id", "environment", "gpu.slug"),
    ("timed_pass", "timed_pass", None, None),
    ("metric", "metric", None, None),
    ("unit", "unit", None, None),
    ("median", "median", None, None),
    ("statistic", "protocol_id", "protocol", "primary_statistic"),
    ("p20", "p20", None, None),
    ("p80", "p80", None, None),
    ("rank", "rank", None, None),
    ("evidence", "evidence", None, None),
    ("source", "source_id", "source", "slug"),
    ("publication", "publication_id", "publication", "slug"),
    ("external_id", "external_id", None, None),
    ("observed_at", "observed_at", None, None),
    ("digest", "digest", None, None),
    ("comparison_key", "group__key", None, None),
]
HEADER = [column for column, *_ in COLUMNS]
OBSERVED = HEADER.index("observed_at")
FORMATS = ("csv", "jsonl")
CONTROL_PARAMS = {"after"}

# Rows per query. Large enough that a round trip is a small part of a chunk's time, small
# enough that a chunk is a few megabytes.
CHUNK_ROWS = 5000


def filtered(params: QueryDict) -> tuple[object | None, int, dict[str, str]]:
    """(queryset, after, errors) for the export's query parameters: the /runs/ filters plus
    `after` (resume after this run id, as a `partial` trailer's next URL says)."""
    unknown = sorted(set(params) - set(RunFilter.base_filters) - CONTROL_PARAMS)
    if unknown:
        return None, 0, {"query": f"Unknown parameter(s): {', '.join(unknown)}."}
    raw_after = params.get("after", "0")
    if not raw_after.isdigit() or len(raw_after) > 18:
        return None, 0, {"after": f"A run id from a partial trailer's next URL, not {raw_after!r}."}
    filters = params.copy()
    filters.pop("after", None)
    filterset = RunFilter(filters, queryset=Run.objects.public())
    if not filterset.is_valid():
        return None, 0, {k: " ".join(v) for k, v in filterset.errors.items()}
    return filterset.qs, int(raw_after), {}


def rows(queryset, *, after: int = 0) -> Iterator[tuple[int, list]]:
    """(run id, export values) of every run of `queryset` with an id above `after`, id order.

    A keyset walk over the primary key: each chunk is its own short query, so nothing holds a
    transaction or a server-side cursor open for the minutes a large export takes, and a chunk
    costs the same at the millionth row as at the first (no OFFSET).
    """
    fields = ["id", *(field for _, field, _, _ in COLUMNS)]
    getters = [
        (i, table, attrgetter(attr)) for i, (_, _, table, attr) in enumerate(COLUMNS) if table
    ]
    ordered = queryset.order_by("id").values_list(*fields)
    tables = catalogue.load()
    while True:
        chunk = list(ordered.filter(id__gt=after)[:CHUNK_ROWS])
        if not chunk:
            return
        for row in chunk:
            values = list(row[1:])
            try:
                for i, table, get in getters:
                    values[i] = get(tables[table][values[i]])
            except KeyError:
                # A catalogue row committed after the export began: reload it once.
                tables = catalogue.load()
                values = list(row[1:])
                for i, table, get in getters:
                    values[i] = get(tables[table][values[i]])
            values[OBSERVED] = values[OBSERVED].isoformat()
            yield row[0], values
        after = chunk[-1][0]
        if len(chunk) < CHUNK_ROWS:
            return


# A spreadsheet runs a cell that starts with one of these as a formula (OWASP, "CSV
# Injection"): upstream names are not ours to trust ("=HYPERLINK(...)" as a kernel name).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralised(value):
    """A text cell that a spreadsheet would run as a formula, with a leading ' so it is read as
    text; numbers and every other text unchanged. The JSONL export keeps the exact value."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _csv(rows: list[list]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerows([neutralised(v) for v in row] for row in rows)
    return buffer.getvalue()


def _jsonl(rows: list[list]) -> str:
    return "".join(
        json.dumps(dict(zip(HEADER, row, strict=True)), ensure_ascii=False) + "\n" for row in rows
    )


def trailer(fmt: str, *, rows: int, sha256: str, next_url: str | None = None) -> str:
    if fmt == "csv":
        if next_url is None:
            return f"# end rows={rows} sha256={sha256}\n"
        return f"# partial rows={rows} sha256={sha256} next={next_url}\n"
    record: dict = {"export": "end" if next_url is None else "partial", "rows": rows}
    record["sha256"] = sha256
    if next_url is not None:
        record["next"] = next_url
    return json.dumps(record) + "\n"


def stream(
    fmt: str,
    runs: Iterable[tuple[int, list]],
    *,
    budget: float | None = None,
    next_url: Callable[[int], str] | None = None,
) -> Iterator[bytes]:
    """The export's bytes, one block per chunk of rows, then the trailer.

    With a `budget` (seconds), stops at the first chunk boundary past it and ends with a
    `partial` trailer whose next URL (`next_url(last id)`) resumes the walk: a part always
    ends by itself before the server's worker timeout cuts it.
    """
    digest = hashlib.sha256()
    encode = _csv if fmt == "csv" else _jsonl
    head = _csv([HEADER]) if fmt == "csv" else ""
    count, block, started = 0, [], time.monotonic()
    for count, (last_id, values) in enumerate(runs, 1):  # noqa: B007 - count is read below
        block.append(values)
        if len(block) == CHUNK_ROWS:
            data = (head + encode(block)).encode()
            digest.update(data)
            yield data
            head, block = "", []
            if budget is not None and next_url and time.monotonic() - started > budget:
                end = trailer(
                    fmt, rows=count, sha256=digest.hexdigest(), next_url=next_url(last_id)
                )
                yield end.encode()
                return
    data = (head + encode(block)).encode()
    digest.update(data)
    yield data + trailer(fmt, rows=count, sha256=digest.hexdigest()).encode()


@dataclass(frozen=True)
class Trailer:
    kind: str  # "end" or "partial"
    rows: int
    sha256: str
    next: str | None = None


def verify(fmt: str, body: bytes) -> Trailer | None:
    """The trailer of a received export when the rows and bytes before it match it; None when
    it is missing or does not match (the file was cut short or altered)."""
    cut = body.rstrip(b"\n").rfind(b"\n") + 1
    payload, last = body[:cut], body[cut:].decode("utf-8", "replace").strip()
    try:
        if fmt == "csv":
            if not last.startswith("# "):
                return None
            kind, *pairs = last[2:].split(" ")
            fields = dict(pair.split("=", 1) for pair in pairs)
            found = Trailer(kind, int(fields["rows"]), fields["sha256"], fields.get("next"))
            counted = sum(1 for _ in csv.reader(io.StringIO(payload.decode()))) - 1
        else:
            record = json.loads(last)
            if not isinstance(record, dict) or "export" not in record:
                return None
            found = Trailer(record["export"], record["rows"], record["sha256"], record.get("next"))
            counted = payload.count(b"\n")
    except (ValueError, KeyError, TypeError):
        return None
    if found.kind not in ("end", "partial") or found.rows != counted:
        return None
    if hashlib.sha256(payload).hexdigest() != found.sha256:
        return None
    return found

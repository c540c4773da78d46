"""The browse page's query: filters, one sort, a keyset (cursor) page and a capped count.

Every sort is an index on runs_run that ends in the primary key (see Run.Meta.indexes), and a
page continues from the last row of the previous one (`sort >= v AND (sort > v OR id > i)`), so
page 1000 costs what page 1 costs and nothing counts the whole match: the page says how many
runs match up to COUNT_CAP and "more than" past it, counted once per version of the run data. The view and
bench/explain.py both build the query here.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime

from django.db.models import F, Q
from django.db.models.query import QuerySet
from django.http import QueryDict

from runs.models import Run
from runs.read.filters import ORDERINGS, RunFilter
from runs.read.freshness import DATA, cached

PAGE_SIZE = 50
COUNT_CAP = 1000
DEFAULT_SORT = "-observed"
# Sort columns that may hold NULL: a current run's rank is NULL only until its publication is
# ranked. NULLs sort last ascending and first descending, PostgreSQL's order for a b-tree read
# forwards or backwards, stated explicitly so SQLite agrees.
NULLABLE = {"rank"}
DATETIMES = {"observed_at", "created_at"}


class BadQuery(ValueError):
    """Parameters the page cannot use: {parameter: message}."""

    def __init__(self, errors: dict[str, str]):
        super().__init__(errors)
        self.errors = errors


BAD_CURSOR = "Not a cursor this page issued: follow the next and previous links."


def _bigint(value: object) -> bool:
    # A number the database column can hold: a larger one would fail in the query, not here.
    return type(value) is int and -(2**63) <= value < 2**63


@dataclass(frozen=True)
class Cursor:
    """A position between two rows: the sort value and id of the row it follows (`after`) or
    precedes (`before`)."""

    sort: str
    value: int | datetime | None
    id: int
    before: bool = False

    def encode(self) -> str:
        value = self.value.isoformat() if isinstance(self.value, datetime) else self.value
        raw = json.dumps([self.sort, value, self.id, int(self.before)], separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str, sort: str) -> Cursor:
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            cursor_sort, value, pk, before = json.loads(raw)
        except (binascii.Error, UnicodeError, ValueError, TypeError):
            raise BadQuery({"cursor": BAD_CURSOR}) from None
        if cursor_sort != sort:
            raise BadQuery(
                {"cursor": "This cursor belongs to another sort order: start from the first page."}
            )
        column = ORDERINGS[sort.lstrip("-")]
        valid = _bigint(pk) and before in (0, 1)
        if column in DATETIMES and valid and isinstance(value, str):
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                valid = False
            valid = valid and value.tzinfo is not None
        elif value is None:
            valid = valid and column in NULLABLE
        else:
            valid = valid and _bigint(value) and column not in DATETIMES
        if not valid:
            raise BadQuery({"cursor": BAD_CURSOR})
        return cls(sort, value, pk, bool(before))


@dataclass
class Page:
    runs: list[Run]  # with only the id and the sort key loaded
    matching: int  # counted no further than cap + 1
    cap: int
    next: Cursor | None
    previous: Cursor | None

    @property
    def more_than_cap(self) -> bool:
        return self.matching > self.cap


class Browse:
    """One request's browse query. `browse(params)` builds it or raises BadQuery."""

    def __init__(self, filterset: RunFilter, sort: str, cursor: Cursor | None):
        self.filterset = filterset
        self.sort = sort
        self.cursor = cursor
        self.column = ORDERINGS[sort.lstrip("-")]
        self.descending = sort.startswith("-")

    def _ordering(self, descending: bool):
        field = F(self.column)
        if self.column in NULLABLE:
            field = field.desc(nulls_first=True) if descending else field.asc(nulls_last=True)
        else:
            field = field.desc() if descending else field.asc()
        return field, F("id").desc() if descending else F("id").asc()

    def _beyond(self, cursor: Cursor, descending: bool) -> Q:
        """Rows after the cursor's row in the order (column NULLS LAST, id), read ascending, or
        before it when `descending`. The leading `>=`/`<=` is what lets the index scan start at
        the cursor instead of at the first row."""
        c, v, i = self.column, cursor.value, cursor.id
        if v is None:  # only a nullable column's NULL block: it sorts after every value
            if descending:
                return Q(**{f"{c}__isnull": True, "id__lt": i}) | Q(**{f"{c}__isnull": False})
            return Q(**{f"{c}__isnull": True, "id__gt": i})
        if descending:
            return Q(**{f"{c}__lte": v}) & (Q(**{f"{c}__lt": v}) | Q(id__lt=i))
        beyond = Q(**{f"{c}__gte": v}) & (Q(**{f"{c}__gt": v}) | Q(id__gt=i))
        if c in NULLABLE:
            beyond |= Q(**{f"{c}__isnull": True})
        return beyond

    def page_queryset(self) -> QuerySet:
        """The page's rows plus one (to know whether another page follows), in reading order
        reversed when paging backwards."""
        backwards = self.cursor is not None and self.cursor.before
        # Paging backwards reads the same index in the other direction.
        descending = self.descending != backwards
        # Only the id and the sort key: the rows are loaded whole for the page's fifty
        # (runs/pages/listing.py), and the cursor needs nothing else.
        queryset = self.filterset.qs.only("id", self.column).order_by(*self._ordering(descending))
        if self.cursor is not None:
            queryset = queryset.filter(self._beyond(self.cursor, descending))
        return queryset[: PAGE_SIZE + 1]

    def count_queryset(self) -> QuerySet:
        """Matching runs, counted no further than COUNT_CAP + 1."""
        return self.filterset.qs.order_by().values("id")[: COUNT_CAP + 1]

    def matching(self) -> int:
        """The capped count, kept under the run data's version for each combination of filters: it does not
        depend on the sort or the page, so paging through a result or re-sorting it counts
        once. (Two filters can leave a thousand runs scattered over the heap: counting them
        is most of such a page's SQL.)"""
        cleaned = self.filterset.form.cleaned_data if self.filterset.is_bound else {}
        filters = sorted((k, v) for k, v in cleaned.items() if k != "ordering" and v)
        key = hashlib.sha256(json.dumps(filters, default=str).encode()).hexdigest()
        return cached(f"browse-count:{key}", [DATA], lambda: self.count_queryset().count())

    def _cursor(self, run: Run, *, before: bool) -> Cursor:
        return Cursor(self.sort, getattr(run, self.column), run.pk, before)

    def page(self) -> Page:
        rows = list(self.page_queryset())
        more = len(rows) > PAGE_SIZE
        rows = rows[:PAGE_SIZE]
        backwards = self.cursor is not None and self.cursor.before
        if backwards:
            rows.reverse()
        # Forwards, a previous page exists when we came from one; backwards, a next one does.
        has_next = more if not backwards else True
        has_previous = self.cursor is not None if not backwards else more
        return Page(
            runs=rows,
            matching=self.matching(),
            cap=COUNT_CAP,
            next=self._cursor(rows[-1], before=False) if rows and has_next else None,
            previous=self._cursor(rows[0], before=True) if rows and has_previous else None,
        )


def browse(params: QueryDict, queryset: QuerySet | None = None) -> Browse:
    """The browse query for these GET parameters; BadQuery names each one it cannot use."""
    base = Run.objects.public() if queryset is None else queryset
    filterset = RunFilter(params or None, queryset=base)
    if filterset.is_bound and not filterset.is_valid():
        raise BadQuery({field: " ".join(errs) for field, errs in filterset.errors.items()})
    terms = filterset.form.cleaned_data.get("ordering") if filterset.is_bound else None
    if terms and len(terms) > 1:
        raise BadQuery({"ordering": "Sort by one field at a time."})
    sort = terms[0] if terms else DEFAULT_SORT
    raw = params.get("cursor")
    cursor = Cursor.decode(raw, sort) if raw else None
    return Browse(filterset, sort, cursor)

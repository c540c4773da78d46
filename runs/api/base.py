"""What every endpoint of the API shares, the runs API's and those of runs/changes/,
runs/claims/ and runs/fidelity/: a cursor pagination that refuses a page size or a cursor it
did not issue, and a mixin that refuses a query parameter the endpoint does not know. Both
answer a 400 (or a 404 for a cursor) that names the parameter, never a silently ignored typo."""

from __future__ import annotations

import base64
import binascii
from urllib import parse

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination

from runs.read.filters import ORDERINGS, RunFilter

CONTROL_PARAMS = {"format"}
PAGE_PARAMS = {"cursor", "page_size"}


class StrictCursorPagination(CursorPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500
    ordering = "-id"

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        if not raw.isdigit() or not 1 <= int(raw) <= self.max_page_size:
            raise ValidationError(
                {"page_size": f"A whole number from 1 to {self.max_page_size}, not {raw!r}."}
            )
        return int(raw)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:  # the bounds get_page_size enforces, stated
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"].update(minimum=1, maximum=self.max_page_size)
        return parameters

    def get_ordering(self, request, queryset, view):
        # RunFilter has validated `ordering` already (a bad value is a 400 before this runs);
        # the cursor needs it as model fields with a unique tie-breaker.
        raw = request.query_params.get("ordering", "") if view is not None else ""
        terms = [t.strip() for t in raw.split(",") if t.strip()]
        if terms and getattr(view, "filterset_class", None) is RunFilter:
            fields = [("-" if t.startswith("-") else "") + ORDERINGS[t.lstrip("-")] for t in terms]
            return (*fields, "-id" if terms[0].startswith("-") else "id")
        return (self.ordering,) if isinstance(self.ordering, str) else self.ordering

    def decode_cursor(self, request):
        # DRF reads any base64 it can as "start from the beginning"; a cursor this API did not
        # issue is a client bug worth saying so.
        # 404, as DRF answers a cursor it cannot use: any text is a schema-valid cursor, so
        # "not one of ours" is a lookup that found nothing, not malformed input.
        bad = NotFound({"cursor": "Not a cursor this API issued: follow the next/previous links."})
        encoded = request.query_params.get(self.cursor_query_param)
        if encoded is None:
            return None
        try:
            decoded = base64.b64decode(encoded.encode("ascii"), validate=True).decode("ascii")
        except (UnicodeError, ValueError, binascii.Error):
            raise bad from None
        tokens = parse.parse_qs(decoded, keep_blank_values=True)
        if not tokens or set(tokens) - {"o", "r", "p"}:
            raise bad
        try:
            return super().decode_cursor(request)
        except NotFound:
            raise bad from None


# A comment, not a docstring: the schema generator would publish a mixin's docstring as the
# description of every endpoint that has none of its own.
class StrictQueryMixin:
    # Reject query parameters the endpoint does not know.

    extra_params: set[str] = set()

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        allowed = CONTROL_PARAMS | self.extra_params
        if getattr(self, "pagination_class", None) is not None and hasattr(self, "list"):
            allowed |= PAGE_PARAMS
        if getattr(self, "filterset_class", None):
            allowed |= set(self.filterset_class.base_filters)
        unknown = sorted(set(request.query_params) - allowed)
        if unknown:
            raise ValidationError(
                {
                    "query": f"Unknown parameter(s): {', '.join(unknown)}. "
                    f"Known: {', '.join(sorted(allowed))}."
                }
            )

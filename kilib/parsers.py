"""The API's JSON parser: DRF's, reading through kilib.jsonbounds, so a body nested
100,000 deep, a NaN, an integer beyond 2^53 or a NUL in any text field is a 400 that says so,
before a serializer or the database sees it."""

from __future__ import annotations

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from kilib import jsonbounds


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            return jsonbounds.loads(stream.read().decode(encoding))
        except jsonbounds.JSONLimitError as exc:
            if exc.path and isinstance(exc.path[0], str):  # name the field, as a serializer does
                raise ParseError({exc.path[0]: [exc.why]}) from None
            raise ParseError(f"JSON parse error - {exc}") from None
        except ValueError as exc:  # not JSON; UnicodeDecodeError is a ValueError too
            raise ParseError(f"JSON parse error - {exc}") from None

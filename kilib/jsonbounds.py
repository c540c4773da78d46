"""JSON from outside, read within bounds: the one reader for API bodies, result files and the
JSON inside upstream files.

Python's parser recurses once per nesting level, so 100,000 `[` raise RecursionError, and
whatever walks the parsed value afterwards (serializers, RFC 8785, jsonschema) recurses too.
The depth is therefore counted on the text, before parsing, with a scan that stops at the first
level over the limit. The values must then be ones every later step can hold: no NaN or
Infinity (RFC 8785 and PostgreSQL's jsonb refuse them), no number that overflows to one
(1e400), no integer beyond 2^53 - 1 (RFC 8785 and JavaScript readers lose its exact value), and
no NUL character in a string or a key (PostgreSQL refuses it in text and jsonb). A refusal is a
JSONLimitError (a ValueError) whose message says what was wrong.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 32  # the deepest document the site reads (a RerunResult) nests 6 levels
MAX_SAFE_INTEGER = 2**53 - 1

_TOKEN = re.compile(r'["\[\]{}]')
_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.S)  # after an opening quote


class JSONLimitError(ValueError):
    """JSON that is not read: too deep, a number no reader can hold, or a NUL in a string.
    `path` names where (object keys and array indexes from the top), when known."""

    def __init__(self, why: str, path: tuple = ()):
        self.why = why
        self.path = path
        where = f" (at {'/'.join(str(p) for p in path)})" if path else ""
        super().__init__(why + where)


class _Refused:
    """A number the parser met and no later step can hold; reported with its place."""

    __slots__ = ("why",)

    def __init__(self, why: str):
        self.why = why


def depth_over(text: str, limit: int) -> bool:
    """True when `text` nests arrays and objects deeper than `limit` (brackets inside strings
    do not count). Stops at the first level over the limit."""
    depth = pos = 0
    while (token := _TOKEN.search(text, pos)) is not None:
        if token.group() == '"':
            rest = _STRING_REST.match(text, token.end())
            if rest is None:
                return False  # an unterminated string: the parser says so
            pos = rest.end()
            continue
        depth += 1 if token.group() in "[{" else -1
        if depth > limit:
            return True
        pos = token.end()
    return False


def _constant(name: str) -> _Refused:
    return _Refused(f"{name} is not a number JSON can carry")


def _float(text: str) -> float | _Refused:
    value = float(text)
    return value if math.isfinite(value) else _Refused(f"the number {text[:40]} is too large")


def _int(text: str) -> int | _Refused:
    if len(text.lstrip("-")) > 16 or abs(value := int(text)) > MAX_SAFE_INTEGER:
        return _Refused(f"the integer {text[:40]} is beyond 2^53 - 1")
    return value


def loads(data: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """json.loads within the bounds above; JSONLimitError or json.JSONDecodeError (both
    ValueErrors) otherwise."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise JSONLimitError(f"not UTF-8 text ({exc.reason})") from None
    if depth_over(data, max_depth):
        raise JSONLimitError(f"nested deeper than {max_depth} levels")
    # The C parser first: the walk refuses every value the hooks below would (a NaN, an
    # overflow to infinity, an integer beyond 2^53 - 1), and only then is the text parsed
    # again with them, so that the refusal names the number as it was written.
    try:
        value = json.loads(data)
    except ValueError:  # a parse error, or an integer of thousands of digits
        value = _Refused("")
    if not isinstance(value, _Refused) and _problem(value, max_depth, 0, ()) is None:
        return value
    value = json.loads(data, parse_constant=_constant, parse_float=_float, parse_int=_int)
    problem = _problem(value, max_depth, 0, ())
    if problem:
        raise JSONLimitError(*problem)
    return value


def value_problem(value: Any, *, max_depth: int = MAX_DEPTH) -> str | None:
    """The same bounds for a value already parsed (or built from text): why it is not one the
    site can store and digest, or None."""
    problem = _problem(value, max_depth, 0, ())
    return str(JSONLimitError(*problem)) if problem else None


def _problem(value: Any, max_depth: int, depth: int, path: tuple) -> tuple[str, tuple] | None:
    if depth > max_depth:
        return f"nested deeper than {max_depth} levels", path
    if isinstance(value, _Refused):
        return value.why, path
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value!r} is not a finite number", path
    if isinstance(value, int) and abs(value) > MAX_SAFE_INTEGER:
        return "an integer beyond 2^53 - 1", path
    if isinstance(value, str) and "\x00" in value:
        return "a NUL character is not allowed in text", path
    if isinstance(value, dict):  # a key is checked where its object is
        children = [(path, key) for key in value] + [((*path, k), v) for k, v in value.items()]
    elif isinstance(value, list):
        # A result's samples, thousands of floats, checked in C: a sum is finite only when
        # every term is (finite terms that overflow it are walked one by one below).
        if set(map(type, value)) == {float} and math.isfinite(sum(value)):
            return None
        children = [((*path, i), item) for i, item in enumerate(value)]
    else:
        return None
    for where, item in children:
        problem = _problem(item, max_depth, depth + 1, where)
        if problem:
            return problem
    return None

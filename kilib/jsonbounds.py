"""JSON from outside, read within bounds: the one reader for API bodies, result files and the
JSON inside upstream files.

Python's parser recurses once per nesting level, so 100,000 `[` raise RecursionError (refused
here as too deep), and whatever walks the parsed value afterwards (serializers, RFC 8785,
jsonschema) recurses too: a walk of the parsed value refuses any array or object nested past
MAX_DEPTH levels before anything else walks it. The values must be ones every later step can
hold: no NaN or Infinity (RFC 8785 and PostgreSQL's jsonb refuse them), no number that
overflows to one (1e400), no integer beyond 2^53 - 1 (RFC 8785 and JavaScript readers lose its
exact value), and no NUL character in a string or a key (PostgreSQL refuses it in text and
jsonb). A refusal is a JSONLimitError (a ValueError) whose message says what was wrong.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 32  # the deepest document the site reads (a RerunResult) nests 6 levels
MAX_SAFE_INTEGER = 2**53 - 1


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
    # The C parser first: the walk refuses every value the hooks below would (a NaN, an
    # overflow to infinity, an integer beyond 2^53 - 1) and every level past max_depth, and
    # only then is the text parsed again with them, so that the refusal names the number as
    # it was written. Nesting deeper than the interpreter's recursion limit (100,000 `[`)
    # stops the parser itself, at that limit, before any walk.
    try:
        value = _parsed(data, max_depth)
    except ValueError:  # a parse error, or an integer of thousands of digits
        value = _Refused("")
    if not isinstance(value, _Refused) and _problem(value, max_depth, 0, ()) is None:
        return value
    value = _parsed(data, max_depth, parse_constant=_constant, parse_float=_float, parse_int=_int)
    problem = _problem(value, max_depth, 0, ())
    if problem:
        raise JSONLimitError(*problem)
    return value


def _parsed(data: str, max_depth: int, **hooks) -> Any:
    try:
        return json.loads(data, **hooks)
    except RecursionError:
        raise JSONLimitError(f"nested deeper than {max_depth} levels") from None


def value_problem(value: Any, *, max_depth: int = MAX_DEPTH) -> str | None:
    """The same bounds for a value already parsed (or built from text): why it is not one the
    site can store and digest, or None."""
    problem = _problem(value, max_depth, 0, ())
    return str(JSONLimitError(*problem)) if problem else None


def _problem(value: Any, max_depth: int, depth: int, path: tuple) -> tuple[str, tuple] | None:
    if depth >= max_depth and isinstance(value, dict | list):  # the array at depth 0 is level 1
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
    safe = MAX_SAFE_INTEGER
    for where, item in children:
        # Short text and small numbers, most of a document, pass here without a call.
        kind = type(item)
        if (kind is str and "\x00" not in item) or (kind is int and -safe <= item <= safe):
            continue
        problem = _problem(item, max_depth, depth + 1, where)
        if problem:
            return problem
    return None

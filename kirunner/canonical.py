"""RFC 8785 JSON Canonicalization Scheme (JCS), stdlib only.

The signature covers these bytes, so the server and the runner must produce the same
octets for the same payload. The runner may not depend on the ``rfc8785`` package (a GPU
host installs as little as possible), hence this small serializer; the tests compare it
with that package on many payloads.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

__all__ = ["CanonicalizationError", "canonicalize", "format_number"]

# ECMAScript numbers are IEEE doubles: integers beyond this lose precision, and the
# rfc8785 package refuses them too rather than silently rounding.
_MAX_SAFE_INTEGER = 2**53 - 1

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


class CanonicalizationError(ValueError):
    """The value has no RFC 8785 form (NaN, Infinity, huge int, non-string key...)."""


def canonicalize(value: Any) -> bytes:
    """Return the RFC 8785 canonical UTF-8 bytes of a JSON-compatible value."""
    parts: list[str] = []
    _write(value, parts)
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates are not Unicode text
        raise CanonicalizationError(f"string is not valid Unicode: {exc}") from exc


def _write(value: Any, out: list[str]) -> None:
    # bool before int: True is an int in Python but a literal in JSON.
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        if abs(value) > _MAX_SAFE_INTEGER:
            raise CanonicalizationError(f"integer {value} is outside the IEEE double safe range")
        out.append(str(value))
    elif isinstance(value, float):
        out.append(format_number(value))
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise CanonicalizationError(f"object key {key!r} is not a string")
        # JCS orders members by their names as UTF-16 code units; big-endian UTF-16
        # bytes compare in exactly that order (surrogate pairs included).
        keys = sorted(value, key=lambda k: k.encode("utf-16-be", "surrogatepass"))
        out.append("{")
        for i, key in enumerate(keys):
            if i:
                out.append(",")
            out.append(_string(key))
            out.append(":")
            _write(value[key], out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise CanonicalizationError(f"type {type(value).__name__} has no JSON form")


def _string(s: str) -> str:
    chars = ['"']
    for ch in s:
        if ch in _ESCAPES:
            chars.append(_ESCAPES[ch])
        elif ch < " ":
            chars.append(f"\\u{ord(ch):04x}")
        else:
            chars.append(ch)
    chars.append('"')
    return "".join(chars)


def format_number(x: float) -> str:
    """Format a double the way ECMAScript's Number.prototype.toString does."""
    if math.isnan(x) or math.isinf(x):
        raise CanonicalizationError(f"{x!r} has no JSON form")
    if x == 0:
        return "0"  # also -0.0, which ES prints as "0"
    sign = "-" if x < 0 else ""
    # repr gives the shortest digit string that round-trips, which is the digit string
    # ES6 7.1.12.1 asks for; only the placement of the decimal point differs.
    digits_t, exp = Decimal(repr(abs(x))).normalize().as_tuple()[1:]
    digits = "".join(str(d) for d in digits_t)
    k = len(digits)
    n = exp + k  # value = 0.<digits> * 10**n
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        body = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body

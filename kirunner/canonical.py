"""RFC 8785 (JCS) canonical JSON: the one rule behind every digest and signature.

The server's manifest digests (runs.manifest.canonical), the runner's result signatures and the
server's verification of them (both kirunner.sign) all call `canonicalize`, so the bytes
cannot drift apart; `sha256_digest` is the one "sha256:" digest rule and `API_VERSION` the one
version every document and result carries. The implementation is the maintained `rfc8785`
package, a plain library with no dependencies, so the runner stays importable without Django.

The C JSON encoder gives the same bytes as RFC 8785 whenever every key is an ASCII string and
every number prints alike under Python and ECMAScript rules; that covers nearly every manifest
and is many times faster than the pure-Python canonicaliser. A document whose only difference
is in its numbers (integral floats such as 4096.0, exponents: most signed results) goes through
the C encoder too, each such number first put aside as a marker and then written back in the
package's own form (`bench/canonical.py`: the 6,226 signed result payloads of data/reruns in
3.9 s against the package's 8.0 s, every one byte-identical). The package handles the rest
(non-ASCII keys, values without a form). The tests compare every path with the package.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from functools import lru_cache
from typing import Any

import rfc8785

__all__ = ["API_VERSION", "CanonicalizationError", "canonicalize", "format_number", "sha256_digest"]

API_VERSION = "kernelindex.dev/v1alpha1"


class CanonicalizationError(ValueError):
    """The value has no RFC 8785 form (NaN, Infinity, huge int, non-string key...)."""


def canonicalize(value: Any) -> bytes:
    """Return the RFC 8785 canonical UTF-8 bytes of a JSON-compatible value."""
    if _plain(value):
        try:
            return _ENCODER.encode(value).encode()
        except UnicodeEncodeError:
            pass  # a lone surrogate: the package says why it has no form
    else:
        fast = _with_numbers_put_back(value)
        if fast is not None:
            return fast
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError, UnicodeError) as exc:
        raise CanonicalizationError(str(exc)) from exc


def sha256_digest(value: Any) -> str:
    """The "sha256:" digest of the value's canonical bytes: manifests, payloads, results."""
    return digest_bytes(canonicalize(value))


def digest_bytes(data: bytes) -> str:
    """The "sha256:" digest of canonical bytes already made (a manifest's, from its spec's)."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


# json.dumps with these options builds a new encoder on every call, a third of the cost of
# encoding a run's spec; one instance does the same work.
_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def format_number(x: float) -> str:
    """A double as ECMAScript's Number.prototype.toString writes it (RFC 8785 3.2.2.3)."""
    return canonicalize(float(x)).decode()


# A marker no document holds: a per-process random token. If one did, the count of markers
# found would exceed the count put aside, and the package would canonicalise it instead.
_TOKEN = f"kernelindex-number-{uuid.uuid4().hex}"
_MARKER = re.compile(f'"{_TOKEN}:([0-9]+)"')
_NO_FORM = object()
_SAFE = 2**53


def _with_numbers_put_back(value: Any) -> bytes | None:
    """The C encoder's bytes with each number that prints otherwise under ECMAScript rules
    written in the package's form; None where another difference needs the package."""
    numbers: list[str] = []
    marked = _marked(value, numbers)
    if marked is _NO_FORM:
        return None
    try:
        text = _ENCODER.encode(marked)
    except UnicodeEncodeError:
        return None
    out, found = _MARKER.subn(lambda m: numbers[int(m.group(1))], text)
    return out.encode() if found == len(numbers) else None


@lru_cache(maxsize=65536)
def _number(value: float) -> str:
    # Samples repeat (a timer's resolution, integral byte counts): each form is made once.
    # 0.0 and -0.0 share an entry, as they share the form "0".
    return rfc8785.dumps(value).decode()


def _marked(value: Any, numbers: list[str]) -> Any:
    """A copy of the document with each float _plain refuses replaced by a marker string (its
    RFC 8785 form kept in `numbers`); _NO_FORM where anything else would differ. Exact types
    only (a subclass goes to the package), and a list's plain floats kept in the loop: a
    result is mostly lists of samples."""
    kind = type(value)
    if kind is float:
        if 1e-4 <= abs(value) < 1e16 and not value.is_integer():
            return value
        if value != value or abs(value) == float("inf"):
            return _NO_FORM
        numbers.append(_number(value))
        return f"{_TOKEN}:{len(numbers) - 1}"
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        return value if -_SAFE < value < _SAFE else _NO_FORM
    if kind is list:
        items = []
        for v in value:
            if type(v) is float and 1e-4 <= abs(v) < 1e16 and not v.is_integer():
                items.append(v)
                continue
            v = _marked(v, numbers)
            if v is _NO_FORM:
                return _NO_FORM
            items.append(v)
        return items
    if kind is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str or not k.isascii():
                return _NO_FORM
            v = _marked(v, numbers)
            if v is _NO_FORM:
                return _NO_FORM
            out[k] = v
        return out
    return _NO_FORM


def _plain(value: Any) -> bool:
    # Loops, and strings (most leaves) checked in place: a call and a generator per leaf
    # were half the cost of canonicalising a run's spec.
    if isinstance(value, dict):
        for k, v in value.items():
            if not (isinstance(k, str) and k.isascii()):
                return False
            if not (isinstance(v, str) or _plain(v)):
                return False
        return True
    if isinstance(value, list):
        for v in value:
            if not (isinstance(v, str) or _plain(v)):
                return False
        return True
    if isinstance(value, float):
        # Python switches to exponent form below 1e-4 and from 1e16, ECMAScript below 1e-6
        # and from 1e21; Python also writes 4096.0 where ECMAScript writes 4096.
        return (1e-4 <= abs(value) < 1e16) and not value.is_integer()
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) < 2**53
    return isinstance(value, str | bool) or value is None

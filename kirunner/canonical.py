"""RFC 8785 (JCS) canonical JSON: the one rule behind every digest and signature.

The server's manifest digests (runs.manifest.canonical), the runner's result signatures and the
server's verification of them (both kirunner.sign) all call `canonicalize`, so the bytes
cannot drift apart; `sha256_digest` is the one "sha256:" digest rule and `API_VERSION` the one
version every document and result carries. The implementation is the maintained `rfc8785`
package, a plain library with no dependencies, so the runner stays importable without Django.

The C JSON encoder gives the same bytes as RFC 8785 whenever every key is an ASCII string and
every number prints alike under Python and ECMAScript rules; that covers nearly every manifest
and is many times faster than the pure-Python canonicaliser, which handles the rest
(exponents, integral floats, non-ASCII keys). The tests compare both paths with the package.
"""

from __future__ import annotations

import hashlib
import json
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

"""HMAC-SHA256 signatures over the RFC 8785 bytes of a result's ``payload``.

Only the payload is signed: the envelope (apiVersion, kind, signature) can be rebuilt
by anyone, while every number the server records lives inside the payload.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Mapping
from typing import Any

from .canonical import canonicalize

__all__ = [
    "ALG",
    "SigningError",
    "key_from_env",
    "parse_key",
    "sign_payload",
    "sign_result",
    "verify_result",
]

ALG = "HMAC-SHA256"
KEY_ENV = "KERNELINDEX_WORKER_KEY"
KEY_ID_ENV = "KERNELINDEX_WORKER_KEY_ID"

# A key is read as hex when it looks unmistakably like hex: an even number of hex digits,
# at least 32 of them (128 bits). Anything else is the UTF-8 bytes of the secret.
# "hex:" and "utf8:" prefixes remove the guesswork when a caller needs to.
_HEX_KEY = re.compile(r"^(?:[0-9a-fA-F]{2}){16,}$")


class SigningError(RuntimeError):
    """No usable key, or a result that cannot be signed or verified."""


def parse_key(secret: str) -> bytes:
    """Turn the configured secret into HMAC key bytes (see module notes on hex vs UTF-8)."""
    secret = secret.strip()
    if secret.startswith("hex:"):
        try:
            return bytes.fromhex(secret[4:])
        except ValueError as exc:
            raise SigningError("key has a 'hex:' prefix but is not hex") from exc
    if secret.startswith("utf8:"):
        return secret[5:].encode("utf-8")
    if _HEX_KEY.match(secret):
        return bytes.fromhex(secret)
    return secret.encode("utf-8")


def key_from_env(environ: Mapping[str, str] | None = None) -> tuple[str, bytes]:
    """Return (key id, key bytes) from KERNELINDEX_WORKER_KEY[_ID]."""
    env = os.environ if environ is None else environ
    secret = env.get(KEY_ENV, "")
    key_id = env.get(KEY_ID_ENV, "")
    if not secret:
        raise SigningError(f"{KEY_ENV} is not set; cannot sign")
    if not key_id:
        raise SigningError(f"{KEY_ID_ENV} is not set; the server needs it to pick the key")
    key = parse_key(secret)
    if len(key) < 16:
        raise SigningError("worker key is shorter than 16 bytes")
    return key_id, key


def sign_payload(payload: Any, key: bytes, *, canonical: bytes | None = None) -> str:
    """The HMAC of the payload's canonical bytes (`canonical`, where the caller made them)."""
    data = canonicalize(payload) if canonical is None else canonical
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def sign_result(result: dict[str, Any], key_id: str, key: bytes) -> dict[str, Any]:
    """Set result["signature"] in place and return the result."""
    if "payload" not in result:
        raise SigningError("result has no payload to sign")
    result["signature"] = {
        "alg": ALG,
        "keyId": key_id,
        "value": sign_payload(result["payload"], key),
    }
    return result


def verify_result(result: Mapping[str, Any], key: bytes, *, canonical: bytes | None = None) -> bool:
    """True when the signature matches the payload under this key. `canonical`: the payload's
    canonical bytes where the caller already made them (the server makes them once a result)."""
    sig = result.get("signature")
    if not isinstance(sig, Mapping) or sig.get("alg") != ALG:
        return False
    value = sig.get("value")
    if not isinstance(value, str):
        return False
    expected = sign_payload(result.get("payload"), key, canonical=canonical)
    return hmac.compare_digest(expected, value.lower())

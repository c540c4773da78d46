"""Verification of worker results: HMAC-SHA256 over the RFC 8785 bytes of `payload`.

The key rule is kirunner.sign's own (one rule for worker and server): a secret of at least 32
hex digits is hex, anything else its UTF-8 bytes; "hex:" and "utf8:" prefixes say which
outright. The server's keys come from KERNELINDEX_WORKER_KEYS
({"keyId": "secret", ...}); a worker signs with its own KERNELINDEX_WORKER_KEY[_ID].
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any

from django.conf import settings

from kirunner import sign as kirunner_sign
from kirunner.canonical import canonicalize

ALG = "HMAC-SHA256"


class SigningError(ValueError):
    """A configured key that cannot be used."""


def parse_key(secret: str) -> bytes:
    try:
        return kirunner_sign.parse_key(secret)
    except kirunner_sign.SigningError as exc:
        raise SigningError(str(exc)) from exc


def server_key(key_id: str) -> bytes | None:
    secret = settings.KERNELINDEX_WORKER_KEYS.get(key_id)
    return None if secret is None else parse_key(secret)


def canonical(payload: Any) -> bytes:
    return canonicalize(payload)


def payload_digest(payload: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical(payload)).hexdigest()


def sign(payload: Any, key: bytes) -> str:
    return hmac.new(key, canonical(payload), hashlib.sha256).hexdigest()


def signature_valid(payload: Any, key: bytes, value: str) -> bool:
    return hmac.compare_digest(sign(payload, key), value.lower())


def worker_key() -> tuple[str, bytes]:
    """This worker's own signing key, from its environment (never from the server's list)."""
    key_id = os.getenv("KERNELINDEX_WORKER_KEY_ID", "")
    secret = os.getenv("KERNELINDEX_WORKER_KEY", "")
    if not key_id or not secret:
        raise SigningError("KERNELINDEX_WORKER_KEY_ID and KERNELINDEX_WORKER_KEY must be set")
    key = parse_key(secret)
    if len(key) < 16:
        raise SigningError("worker key is shorter than 16 bytes")
    return key_id, key


def envelope_sign(envelope: dict, key_id: str, key: bytes) -> dict:
    envelope["signature"] = {"alg": ALG, "keyId": key_id, "value": sign(envelope["payload"], key)}
    return envelope

"""HMAC-SHA256 over the JCS bytes of the payload: round trip, tampering, key handling."""

from __future__ import annotations

import copy
import hashlib
import hmac

import pytest
import rfc8785

from kirunner.sign import (
    SigningError,
    key_from_env,
    parse_key,
    sign_payload,
    sign_result,
    verify_result,
)

KEY = bytes(range(32))
RESULT = {
    "apiVersion": "kernelindex.dev/v1alpha1",
    "kind": "RerunResult",
    "payload": {
        "job": {"id": "6f1c1f7e-1b53-4a43-9d1e-2a4f9c1f0a11", "nonce": "00ff" * 8},
        "run": {"publicId": "01a0202b"},
        "benchmark": "llama4_rope",
        "measurement": {"median": 0.25, "p20": 0.2, "p80": 0.3, "samples": [0.2, 0.25, 0.3, 1e-7]},
        "environment": {"gpuName": "NVIDIA H200", "note": "\u00e9\u20ac"},
        "error": None,
    },
    "signature": None,
}


def test_signature_is_hmac_of_rfc8785_payload() -> None:
    signed = sign_result(copy.deepcopy(RESULT), "worker-1", KEY)
    expected = hmac.new(KEY, rfc8785.dumps(RESULT["payload"]), hashlib.sha256).hexdigest()
    assert signed["signature"] == {"alg": "HMAC-SHA256", "keyId": "worker-1", "value": expected}
    assert verify_result(signed, KEY)


def test_key_order_and_whitespace_do_not_matter() -> None:
    payload = RESULT["payload"]
    reordered = dict(reversed(list(payload.items())))
    assert sign_payload(payload, KEY) == sign_payload(reordered, KEY)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda p: p["measurement"].__setitem__("median", 0.2500001),
        lambda p: p["measurement"]["samples"].append(0.1),
        lambda p: p["job"].__setitem__("nonce", "11ff" * 8),
        lambda p: p["environment"].__setitem__("gpuName", "NVIDIA H100"),
        lambda p: p.__setitem__("error", "x"),
        lambda p: p.__setitem__("extra", 1),
    ],
)
def test_tampering_breaks_the_signature(tamper) -> None:
    signed = sign_result(copy.deepcopy(RESULT), "worker-1", KEY)
    tamper(signed["payload"])
    assert not verify_result(signed, KEY)


def test_wrong_key_or_missing_signature_fails() -> None:
    signed = sign_result(copy.deepcopy(RESULT), "worker-1", KEY)
    assert not verify_result(signed, bytes(32))
    assert not verify_result(RESULT, KEY)
    broken = copy.deepcopy(signed)
    broken["signature"]["alg"] = "HMAC-SHA1"
    assert not verify_result(broken, KEY)


def test_key_parsing() -> None:
    assert parse_key("00" * 16) == bytes(16)
    assert parse_key("hex:0a0b") == b"\x0a\x0b"
    assert parse_key("utf8:" + "00" * 16) == ("00" * 16).encode()
    assert parse_key("correct horse battery staple") == b"correct horse battery staple"
    assert parse_key("abcdef") == b"abcdef"  # too short to be read as hex
    with pytest.raises(SigningError):
        parse_key("hex:xyz")


def test_key_from_env() -> None:
    env = {"KERNELINDEX_WORKER_KEY": KEY.hex(), "KERNELINDEX_WORKER_KEY_ID": "w1"}
    assert key_from_env(env) == ("w1", KEY)
    with pytest.raises(SigningError, match="KERNELINDEX_WORKER_KEY is not set"):
        key_from_env({"KERNELINDEX_WORKER_KEY_ID": "w1"})
    with pytest.raises(SigningError, match="KERNELINDEX_WORKER_KEY_ID"):
        key_from_env({"KERNELINDEX_WORKER_KEY": KEY.hex()})
    with pytest.raises(SigningError, match="shorter"):
        key_from_env({"KERNELINDEX_WORKER_KEY": "short", "KERNELINDEX_WORKER_KEY_ID": "w1"})

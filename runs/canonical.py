"""Canonical manifests and their digests.

A document is {"apiVersion", "kind", "metadata", "spec"}; its digest is "sha256:" + the hex
SHA-256 of the RFC 8785 (JCS) canonical JSON of {apiVersion, kind, spec}. Metadata is not
digested, so titles can be reworded without changing what a digest pins.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import rfc8785

API_VERSION = "kernelindex.dev/v1alpha1"


def canonical_json(value: Any) -> bytes:
    """RFC 8785 bytes. The C JSON encoder gives the same bytes whenever every key is ASCII and
    every float prints in plain decimal under both Python and ECMAScript rules; that covers
    nearly every manifest and is many times faster than the pure-Python canonicaliser, which
    handles the rest (exponents, integral floats, non-ASCII keys)."""
    if _plain(value):
        return json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode()
    return rfc8785.dumps(value)


def _plain(value: Any) -> bool:
    if isinstance(value, dict):
        return all(k.isascii() and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, float):
        # Python switches to exponent form below 1e-4 and from 1e16, ECMAScript below 1e-6
        # and from 1e21; Python also writes 4096.0 where ECMAScript writes 4096.
        return (1e-4 <= abs(value) < 1e16) and not value.is_integer()
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) < 2**53
    return isinstance(value, str | bool) or value is None


def sha256_digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(value)).hexdigest()


def document_digest(kind: str, spec: dict) -> str:
    return sha256_digest({"apiVersion": API_VERSION, "kind": kind, "spec": spec})


def document(kind: str, *, name: str, title: str, spec: dict, labels: dict | None = None) -> dict:
    metadata: dict[str, Any] = {"name": name, "title": title}
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}


def run_manifest(run) -> dict:
    """The canonical manifest of a run: the run document and every document its digest pins."""
    return {
        "run": document(
            "BenchmarkRun",
            name=run.name,
            title=run.title,
            spec=run.spec,
            labels=run.labels,
        ),
        "protocol": _doc("BenchmarkProtocol", run.protocol),
        "environment": _doc("ExecutionEnvironment", run.environment),
        "workload": _doc("Workload", run.workload),
        "implementation": _doc("Implementation", run.implementation),
    }


def _doc(kind: str, obj) -> dict:
    return document(kind, name=obj.name, title=obj.title, spec=obj.spec)

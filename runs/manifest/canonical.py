"""Canonical manifests and their digests.

A document is {"apiVersion", "kind", "metadata", "spec"}; its digest is "sha256:" + the hex
SHA-256 of the RFC 8785 (JCS) canonical JSON of {apiVersion, kind, spec}. Metadata is not
digested, so titles can be reworded without changing what a digest pins.
"""

from __future__ import annotations

import functools
from typing import Any

from kirunner.canonical import API_VERSION, canonicalize, digest_bytes, sha256_digest

__all__ = [
    "API_VERSION",
    "canonical_json",
    "document",
    "document_canonical",
    "document_digest",
    "run_manifest",
    "sha256_digest",
]


def canonical_json(value: Any) -> bytes:
    """RFC 8785 bytes, by the one implementation server and runner share."""
    return canonicalize(value)


def document_digest(kind: str, spec: dict) -> str:
    return document_canonical(kind, spec)[1]


def document_canonical(kind: str, spec: dict) -> tuple[bytes, str]:
    """(canonical bytes of the spec, digest of the document).

    JCS orders an object's members by key, and "apiVersion" < "kind" < "spec": the document's
    canonical bytes are its spec's inside a fixed envelope. The spec is canonicalised once, and
    the ingest stores the same bytes as the run's JSON instead of encoding it a second time.
    """
    body = canonical_json(spec)
    return body, digest_bytes(_envelope(kind) + body + b"}")


@functools.cache
def _envelope(kind: str) -> bytes:
    head = canonical_json({"apiVersion": API_VERSION, "kind": kind, "spec": None})
    return head.removesuffix(b"null}")


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

"""Canonical manifests and their digests.

A document is {"apiVersion", "kind", "metadata", "spec"}; its digest is "sha256:" + the hex
SHA-256 of the RFC 8785 (JCS) canonical JSON of {apiVersion, kind, spec}. Metadata is not
digested, so titles can be reworded without changing what a digest pins.
"""

from __future__ import annotations

import hashlib
from typing import Any

from kirunner.canonical import canonicalize

API_VERSION = "kernelindex.dev/v1alpha1"


def canonical_json(value: Any) -> bytes:
    """RFC 8785 bytes, by the one implementation server and runner share."""
    return canonicalize(value)


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

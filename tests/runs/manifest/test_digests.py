"""The example run page's manifest is a test vector for the digest rule."""

from __future__ import annotations

import hashlib
import json

import pytest

from runs.manifest import documents
from runs.manifest.canonical import (
    API_VERSION,
    canonical_json,
    document_canonical,
    document_digest,
    run_manifest,
)
from runs.reference import catalogue

EXAMPLE_RUN_SPEC = {
    "status": "passed",
    "timing": {"latencyNs": {"median": 385536}, "primaryStatistic": "median"},
    "observedAt": "2025-08-07T21:42:12.000Z",
    "measurements": [
        {"unit": "ns", "value": 384685, "metric": "latency", "statistic": "p20"},
        {"unit": "ns", "value": 386240, "metric": "latency", "statistic": "p80"},
    ],
    "sourceNative": {
        "source": "liger-kernel-bench",
        "metrics": {
            "ms_20": 0.3846847891807556,
            "ms_50": 0.38553598523139954,
            "ms_80": 0.38624000549316406,
        },
        "benchmark": "llama4_rope/forward",
        "externalId": "llama4_rope/forward/huggingface/nvidia-h100-80gb-hbm3/"
        "hidden8192-kv_heads8-q_heads32-seq4096-bf16/2025-08-07-21-42-12",
    },
    "protocolDigest": "sha256:a79eaf4df66c97c6adc1fb2d09df78682155d1ea86652ae0b70199875bde7747",
    "workloadDigest": "sha256:8974f9ae1a4284ed6358ddaa324eeb4c076d3c5916579ee84b38fc474a3281bf",
    "environmentDigest": "sha256:2750ae381d6de582f1eb6b9008e0987463d19ede8af127d97d76c5ae09121393",
    "implementationDigest": "sha256:cca024409163839a832c1d39bd301f536494b645171665d65fae5faf2717be48",
}
EXAMPLE_PROTOCOL = "sha256:a79eaf4df66c97c6adc1fb2d09df78682155d1ea86652ae0b70199875bde7747"
EXAMPLE_ENVIRONMENT = "sha256:2750ae381d6de582f1eb6b9008e0987463d19ede8af127d97d76c5ae09121393"


def test_run_digest_rule_reproduces_the_example_page():
    # The page shows the run digest truncated: sha256:896d98802c9bdc00ff4279e…
    digest = document_digest("BenchmarkRun", EXAMPLE_RUN_SPEC)
    assert digest.startswith("sha256:896d98802c9bdc00ff4279e")


def test_metadata_is_not_digested():
    a = document_digest("BenchmarkRun", EXAMPLE_RUN_SPEC)
    changed = {**EXAMPLE_RUN_SPEC, "status": "failed"}
    assert document_digest("BenchmarkRun", changed) != a


def test_protocol_and_environment_specs_match_the_example():
    _, _, protocol = documents.protocol_spec("forward", "latency")
    assert document_digest("BenchmarkProtocol", protocol) == EXAMPLE_PROTOCOL
    _, title, environment = documents.environment_spec(catalogue.GPUS["NVIDIA H100 80GB HBM3"])
    assert document_digest("ExecutionEnvironment", environment) == EXAMPLE_ENVIRONMENT
    assert title == "Liger benchmark host · H100 80GB HBM3"


def test_canonical_json_is_rfc8785():
    # Keys sorted, no whitespace, ECMAScript number forms.
    assert canonical_json({"b": 1, "a": [1.0, 1e-7, 0.5]}) == b'{"a":[1,1e-7,0.5],"b":1}'


@pytest.mark.django_db
def test_ingested_example_row_reproduces_example_digests(example_run):
    spec = example_run.spec
    assert example_run.protocol.digest == EXAMPLE_PROTOCOL
    assert example_run.environment.digest == EXAMPLE_ENVIRONMENT
    assert spec["protocolDigest"] == EXAMPLE_PROTOCOL
    assert spec["environmentDigest"] == EXAMPLE_ENVIRONMENT
    # Everything the example's run spec holds apart from the two digests whose inputs the
    # example does not publish (workload and implementation) comes out identical.
    ours = {k: v for k, v in spec.items() if k not in ("workloadDigest", "implementationDigest")}
    theirs = {
        k: v
        for k, v in EXAMPLE_RUN_SPEC.items()
        if k not in ("workloadDigest", "implementationDigest")
    }
    assert ours == theirs
    assert example_run.digest == document_digest("BenchmarkRun", spec)


@pytest.mark.django_db
def test_manifest_documents_verify(example_run):
    manifest = run_manifest(example_run)
    assert set(manifest) == {"run", "protocol", "environment", "workload", "implementation"}
    kinds = {
        "protocol": "BenchmarkProtocol",
        "environment": "ExecutionEnvironment",
        "workload": "Workload",
        "implementation": "Implementation",
    }
    for key, kind in kinds.items():
        doc = manifest[key]
        assert doc["kind"] == kind
        assert manifest["run"]["spec"][f"{key}Digest"] == document_digest(kind, doc["spec"])
    run = manifest["run"]
    assert run["metadata"]["name"] == (
        "liger-llama4-rope-forward-huggingface-nvidia-h100-80gb-hbm3-hidden8192-kv-heads8-q-heads32-seq4096-b"
    )
    assert run["metadata"]["title"] == "Llama 4 rotary position embedding · huggingface · forward"
    assert run["metadata"]["labels"] == {"liger_version": "0.6.1"}
    assert manifest["protocol"]["metadata"] == {
        "name": "liger-bench-do-bench-forward",
        "title": "Liger benchmark harness · forward pass",
    }


@pytest.mark.django_db
def test_manifest_json_endpoint(client, example_run):
    response = client.get(f"/runs/{example_run.public_id}.json")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    body = json.loads(response.content)
    assert body["run"]["spec"]["timing"]["latencyNs"]["median"] == 385536
    assert body["workload"]["spec"]["inputs"] == [
        {"name": "q", "dtype": "bf16", "shape": [1, 4096, 32, 256]},
        {"name": "k", "dtype": "bf16", "shape": [1, 4096, 8, 256]},
    ]
    assert client.get("/runs/ffffffff.json").status_code == 404


@pytest.mark.parametrize(
    "value",
    [
        {"b": 1, "a": 2, "é": 3},
        [0.0, -0.0, 1.0, 4096.0, 1e-7, 1e-5, 1.5e-4, 0.1, 123456789.125, 1e16, 1e21, 2e300],
        {"s": 'quote " back \\ nl \n tab \t ctrl \x01 uni é € 😀 \u2028'},
        {"nested": [{"z": None, "y": True, "x": False}], "big": 2**53 - 1, "neg": -17},
    ],
)
def test_fast_canonical_json_matches_rfc8785(value):
    import rfc8785

    assert canonical_json(value) == rfc8785.dumps(value)


def test_fast_canonical_json_matches_rfc8785_on_every_shipped_row():
    import rfc8785

    from runs.sources.parsers import parse_liger_csv
    from tests.conftest import LIGER_CSV

    for row in parse_liger_csv(LIGER_CSV.read_bytes(), "all_benchmark_data.csv"):
        doc = {"metrics": row.source_metrics, "params": row.params, "p": [row.median, row.p20]}
        assert canonical_json(doc) == rfc8785.dumps(doc)


def test_spec_bytes_and_digest_match_the_whole_document():
    # The ingest canonicalises a run's spec once and digests it inside a fixed envelope; that
    # must be the digest of the whole document, on the fast path and on the package's path
    # (an integral float, an exponent, a non-ASCII key).
    for spec in (EXAMPLE_RUN_SPEC, {**EXAMPLE_RUN_SPEC, "x": [4096.0, 1e-7, {"é": 1e21}]}):
        body, digest = document_canonical("BenchmarkRun", spec)
        whole = canonical_json({"apiVersion": API_VERSION, "kind": "BenchmarkRun", "spec": spec})
        assert body == canonical_json(spec)
        assert digest == "sha256:" + hashlib.sha256(whole).hexdigest()

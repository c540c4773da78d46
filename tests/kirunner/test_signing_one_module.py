"""One signing module, one API_VERSION, one digest rule, and old signed results still verify."""

from __future__ import annotations

import ast
import copy
import json
import re
from pathlib import Path

import pytest

from kirunner import canonical, sign

ROOT = Path(__file__).resolve().parents[2]
SIGNED_FOLDERS = [
    *sorted((ROOT / "data" / "reruns").iterdir()),
    ROOT / "tests/data/reruns/h200-2026-11-29",
]
SIGNED_FOLDERS = [folder for folder in SIGNED_FOLDERS if (folder / "worker-key.json").exists()]
PYTHON = [
    path
    for path in ROOT.rglob("*.py")
    if not {".venv", "tests", "bench", "migrations", "node_modules"} & set(path.parts)
]
# A "sha256:" digest written out: the prefix joined to a hash's hex digest.
DIGEST_MADE = re.compile(r"""["']sha256:["']\s*\+.*hexdigest\(|f["']sha256:\{[^}]*hexdigest""")


def _signed_results(folder: Path) -> list[Path]:
    found = []
    for path in sorted(folder.rglob("*.json")):
        doc = json.loads(path.read_text())
        if isinstance(doc, dict) and doc.get("kind") == "RerunResult" and doc.get("signature"):
            found.append(path)
    return found


@pytest.mark.parametrize("folder", SIGNED_FOLDERS, ids=lambda folder: folder.name)
def test_committed_signed_results_still_verify(folder: Path) -> None:
    key_doc = json.loads((folder / "worker-key.json").read_text())
    key = sign.parse_key(key_doc["secret"])
    results = _signed_results(folder)
    assert results, f"{folder}: no signed results found"
    for path in results:
        envelope = json.loads(path.read_text())
        assert envelope["apiVersion"] == canonical.API_VERSION, path
        assert envelope["signature"]["keyId"] == key_doc["keyId"], path
        assert sign.verify_result(envelope, key), f"{path}: signature no longer verifies"
    # The check can fail: one figure changed breaks the first result's signature.
    tampered = copy.deepcopy(json.loads(results[0].read_text()))
    tampered["payload"]["job"]["id"] = "00000000-0000-0000-0000-000000000000"
    assert not sign.verify_result(tampered, key)


def test_server_records_what_the_runner_signs(db) -> None:
    """The server's verification and digest are the runner's functions, not copies."""
    from reruns import services, signing

    assert services.sign is sign
    # The digest of a payload is made from its canonical bytes, both the runner's functions.
    assert services.canonicalize is canonical.canonicalize
    assert services.digest_bytes is canonical.digest_bytes
    assert signing.parse_key is sign.parse_key


def _defined_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def test_one_definition_of_each_shared_rule() -> None:
    """API_VERSION, the HMAC, the key rule and the "sha256:" digest helper are each written once."""
    rules = {
        "API_VERSION", "parse_key", "sign_payload", "verify_result", "sha256_digest",
        "digest_bytes",
    }  # fmt: skip
    where: dict[str, list[str]] = {name: [] for name in rules}
    hmac_calls = []
    for path in PYTHON:
        for name in _defined_names(path) & rules:
            where[name].append(str(path.relative_to(ROOT)))
        if "hmac.new(" in path.read_text():
            hmac_calls.append(str(path.relative_to(ROOT)))
    assert where == {
        "API_VERSION": ["kirunner/canonical.py"],
        "parse_key": ["kirunner/sign.py"],
        "sign_payload": ["kirunner/sign.py"],
        "verify_result": ["kirunner/sign.py"],
        "sha256_digest": ["kirunner/canonical.py"],
        "digest_bytes": ["kirunner/canonical.py"],
    }
    assert hmac_calls == ["kirunner/sign.py"]
    # and a "sha256:" digest is made only there: every other module calls those two.
    assert sorted(
        str(p.relative_to(ROOT)) for p in PYTHON if DIGEST_MADE.search(p.read_text())
    ) == ["kirunner/canonical.py"]

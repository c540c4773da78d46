"""Measured reproductions: a kirunner result file uploaded through the form and the API, with
the real H200 results of tests/data/reproductions/h200-2026-12-01, and a hostile set of files
refused with their reasons. A reproduction never moves a run's evidence level."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from attestations import services
from attestations.models import Attestation
from runs.models import Run
from runs.sources.pipeline import ingest
from tests.conftest import DATA, rows_for_the_module
from tests.factories import GpuFactory, RunFactory

from .test_api import _bearer

REAL = Path(__file__).resolve().parent.parent / "data" / "reproductions" / "h200-2026-12-01"


def _real(public_id: str) -> dict:
    return json.loads((REAL / f"result-{public_id}.json").read_text())


def _file(doc_or_bytes, name: str = "result.json") -> SimpleUploadedFile:
    data = doc_or_bytes if isinstance(doc_or_bytes, bytes) else json.dumps(doc_or_bytes).encode()
    return SimpleUploadedFile(name, data, content_type="application/json")


@pytest.fixture(scope="module")
def _ci_ingested(request, django_db_setup, django_db_blocker):
    def write():
        ingest(source_slug="liger-kernel-ci", locations=[str(DATA / "liger-ci" / "02bac05")])

    with rows_for_the_module(request, django_db_blocker, write):
        yield


class _Runs(dict):
    def __missing__(self, public_id: str) -> Run:
        self[public_id] = Run.objects.public().with_related().get(public_id=public_id)
        return self[public_id]


@pytest.fixture
def ci_runs(_ci_ingested, db):
    """Liger CI run 02bac05's runs by public id, whose H200 rows the real results re-measured
    (ingested once for the module: tests/conftest.py, rows_for_the_module), each read when a
    test first asks for it."""
    return _Runs()


def _upload_form(client, run, doc_or_bytes, **extra):
    return client.post(
        f"/runs/{run.public_id}/attest/",
        {"kind": "reproduction", "result_file": _file(doc_or_bytes), "body": "", **extra},
    )


def test_real_h200_result_through_the_form_is_a_pending_measured_reproduction(
    client, ci_runs, owner
):
    run = ci_runs["f459ed2b"]
    evidence = run.evidence
    client.force_login(owner)
    response = _upload_form(client, run, _real("f459ed2b"), body="My H200.")
    assert response.status_code == 302, response.content.decode()[-2000:]
    item = Attestation.objects.get()
    assert item.state == "pending" and item.is_measured and item.kind == "reproduction"
    # Every figure and version comes from the file.
    assert (item.median, item.p20, item.p80, item.unit) == (55680, 54880, 56646, "ns")
    assert item.gpu.upstream_name == "NVIDIA H200" and item.device == "cuda"
    assert item.device_ns == 52877 or abs(item.device_ns - 52880) < 10
    assert item.classification == "device-bound"
    assert (item.driver_version, item.cuda_version, item.torch_version) == (
        "580.159.04", "13.0", "2.11.0+cu130",
    )  # fmt: skip
    assert "liger-kernel 0.6.0" in item.other_versions and item.harness == "kirunner 0.1.0"
    assert item.result_document == _real("f459ed2b") and item.result_digest.startswith("sha256:")
    assert item.delta_percent() == pytest.approx((55680 - 58080) * 100 / 58080)
    run.refresh_from_db()
    assert run.evidence == evidence
    # A measured reproduction is its file: it is not edited, only withdrawn.
    assert client.get(f"/attestations/{item.pk}/edit/").status_code == 409


def test_real_h200_result_through_the_api(ci_runs, owner):
    run = ci_runs["708302df"]
    api = APIClient()
    _bearer(api, owner)
    response = api.post(
        "/api/v1/attestations/",
        {"run": run.public_id, "kind": "reproduction", "result_file": _file(_real("708302df"))},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["measured"] is True and data["runner_version"] == "0.1.0"
    assert data["gpu"] == run.environment.gpu.slug and data["classification"] == "device-bound"
    assert data["median"] == 946432 or abs(data["median"] - 946430) < 10
    assert data["delta_percent"] == pytest.approx((data["median"] - 948480) * 100 / 948480)
    # Typed figures beside a file are refused: the file's own are the figures.
    again = api.post(
        "/api/v1/attestations/",
        {"run": run.public_id, "kind": "reproduction", "median": "1", "input_unit": "us",
         "result_file": _file(_real("708302df"))},
        format="multipart",
    )  # fmt: skip
    assert again.status_code == 400 and "result_file" in again.json()


def test_another_gpu_product_is_not_compared(example_run, owner, client):
    """The H200 result of the example page's H100 row: its median is shown, and no deviation
    from the published median ("another GPU: not comparable")."""
    client.force_login(owner)
    assert _upload_form(client, example_run, _real("8827e3bb")).status_code == 302
    item = Attestation.objects.get()
    assert item.gpu.product != example_run.environment.gpu.product
    assert item.delta_percent() is None
    assert item.not_comparable() == "another GPU: not comparable"


def test_a_typed_in_reproduction_on_another_gpu_is_not_compared(run, owner, staff, client):
    """A reproduction on an A100 of an H100 run showed "+1.5 % vs published"."""
    a100 = GpuFactory(slug="nvidia-a100-sxm4-80gb", upstream_name="NVIDIA A100-SXM4-80GB",
                      product="A100", form_factor="SXM4 80GB")  # fmt: skip
    assert a100.product != run.environment.gpu.product
    item = services.attestation_create(
        run=run,
        author=owner,
        kind="reproduction",
        measurement=services.Measurement(median=391_320, unit="ns"),
        gpu=a100,
    )
    assert item.delta_percent() is None and item.not_comparable() == "another GPU: not comparable"
    same = RunFactory(environment=run.environment, median=run.median)
    on_same = services.attestation_create(
        run=same, author=owner, kind="reproduction",
        measurement=services.Measurement(median=391_320, unit="ns"), gpu=run.environment.gpu,
    )  # fmt: skip
    assert on_same.delta_percent() == pytest.approx(1.5, abs=0.01)
    unnamed = services.attestation_create(
        run=run, author=owner, kind="reproduction",
        measurement=services.Measurement(median=391_320, unit="ns"),
    )  # fmt: skip
    assert unnamed.delta_percent() is None and "no GPU named" in unnamed.not_comparable()
    services.attestation_moderate(attestations=[item], moderator=staff, state="approved")
    for url in (run.get_absolute_url(), f"/users/{owner.username}/", item.get_absolute_url()):
        page = client.get(url).content.decode()
        assert "another GPU: not comparable" in page and "+1.5 % vs published" not in page, url
        assert "reported by the user, no measurement file" in page.lower(), url


# --- The hostile set ------------------------------------------------------------------------


def _edited(change) -> dict:
    doc = copy.deepcopy(_real("f459ed2b"))
    change(doc["payload"])
    return doc


def _nested(depth: int) -> bytes:
    """The real result with `depth` nested lists inside it (built as text: the encoder
    itself recurses)."""
    text = json.dumps(_real("f459ed2b"))
    assert '"details": {' in text
    return text.replace(
        '"details": {', '"details": {"extra": ' + "[" * depth + "]" * depth + ", ", 1
    ).encode()


def _set(path: str, value):
    def change(payload):
        *parents, last = path.split(".")
        target = payload
        for part in parents:
            target = target[part]
        target[last] = value

    return change


def _forge_check(payload):
    payload["correctness"]["checks"][0]["passed"] = False  # "passed": true kept above it


def _signed(doc_payload):
    doc_payload["job"]["nonce"] = "0" * 32


HOSTILE = {
    "wrong workload": (
        _edited(
            _set("workload.requested", {"M": 2048, "dtype": "bf16", "eps": 1e-06, "hidden": 8192})
        ),  # fmt: skip
        "its workload",
    ),
    "another run's result": (_edited(_set("run.publicId", "b4d23afc")), "it measured run"),
    "another provider": (_edited(_set("provider", "huggingface")), "its provider"),
    "failed correctness": (
        _edited(lambda p: (_set("status", "incorrect")(p), _set("correctness.passed", False)(p))),
        "its status is 'incorrect'",
    ),
    "forged correctness block": (_edited(_forge_check), "check 'y' did not pass"),
    "correctness with no checks": (_edited(_set("correctness.checks", [])), "lists no checks"),
    "negative median": (
        _edited(
            lambda p: [
                _set(f"measurement.{k}", -v)(p)
                for k, v in (("median", 0.05), ("p20", 0.06), ("p80", 0.04))
            ]
        ),
        "above zero",
    ),  # fmt: skip
    "zero p20": (_edited(_set("measurement.p20", 0)), "above zero"),
    "quantiles out of order": (_edited(_set("measurement.p20", 0.09)), "not in order"),
    "below the physical floor": (
        _edited(
            lambda p: (
                [_set(f"measurement.{k}", 1e-6)(p) for k in ("median", "p20", "p80")]
                + [
                    _set("measurement.samples", [1e-6])(p),
                    _set("measurement.values", [1e-6] * 3)(p),
                ]
            )
        ),
        "below the physical floor",
    ),  # fmt: skip
    "string median": (_edited(_set("measurement.median", "55.6")), "is not of type 'number'"),
    "boolean median": (_edited(_set("measurement.median", True)), "is not of type 'number'"),
    "a controlled job's nonce": (_edited(_signed), "not the result of a self-run job"),
    "a worker signature": (
        {**_real("f459ed2b"), "signature": {"alg": "HMAC-SHA256", "keyId": "k", "value": "0" * 64}},
        "not the result of a self-run job",
    ),
    "unknown GPU": (
        _edited(_set("environment.gpuName", "NVIDIA Imaginary 9000")),
        "not in the index's GPU catalogue",
    ),  # fmt: skip
    "nested 40 deep": (_nested(40), "nests deeper than 32"),
    "nested 50000 deep": (_nested(50_000), "nests deeper than 32"),
    "NaN median": (
        json.dumps(_real("f459ed2b")).replace('"median": 0.05567999929189682', '"median": NaN'),
        "NaN is not a number JSON allows",
    ),
    "infinite p80": (
        json.dumps(_real("f459ed2b")).replace('"p80": 0.056646399199962616', '"p80": Infinity'),
        "Infinity is not a number JSON allows",
    ),
    "a NUL character": (
        json.dumps(_real("f459ed2b")).replace(
            '"status": "ok"', '"status": "ok", "x\\u0000": "\\u0000"'
        ),
        "it holds a NUL character",
    ),
    "not JSON": (b"median=55us", "it is not JSON"),
    "not UTF-8": (b"\xff\xfe{}", "not UTF-8"),
    "a JSON list": ([1, 2, 3], "not the result of a self-run job"),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_result_files_are_refused_with_their_reason(name, ci_runs, owner, client):
    doc, reason = HOSTILE[name]
    data = doc if isinstance(doc, bytes) else (doc.encode() if isinstance(doc, str) else doc)
    run = ci_runs["f459ed2b"]
    client.force_login(owner)
    page = _upload_form(client, run, data)
    assert page.status_code == 200  # the form again, with the reason
    assert reason in page.content.decode().replace("&#x27;", "'"), name
    api = APIClient()
    _bearer(api, owner)
    answer = api.post(
        "/api/v1/attestations/",
        {"run": run.public_id, "kind": "reproduction", "result_file": _file(data)},
        format="multipart",
    )
    assert answer.status_code == 422  # valid for the schema, refused by the rules it cannot state
    assert reason in json.dumps(answer.json()["result_file"]), (name, answer.json())
    assert not Attestation.objects.exists()


def test_a_10_mb_file_is_refused_before_it_is_read(ci_runs, owner, client):
    run = ci_runs["f459ed2b"]
    big = b"{" + b" " * (10 * 2**20) + b"}"
    client.force_login(owner)
    page = _upload_form(client, run, big)
    assert page.status_code == 413 and "larger than 2 MiB" in page.content.decode()
    api = APIClient()
    _bearer(api, owner)
    answer = api.post(
        "/api/v1/attestations/",
        {"run": run.public_id, "kind": "reproduction", "result_file": _file(big)},
        format="multipart",
    )
    assert answer.status_code == 413 and "larger than 2 MiB" in answer.json()["detail"]
    assert not Attestation.objects.exists()


def test_a_file_just_over_the_bound_is_refused_by_its_size(ci_runs, owner, settings):
    """Within the request bound, over the file bound: the file's own size refuses it."""
    settings.COMMUNITY_RESULT_FILE_MAX_BYTES = 4096
    api = APIClient()
    _bearer(api, owner)
    answer = api.post(
        "/api/v1/attestations/",
        {"run": "f459ed2b", "kind": "reproduction", "result_file": _file(_real("f459ed2b"))},
        format="multipart",
    )
    assert answer.status_code == 422 and "larger than" in json.dumps(answer.json())


def test_uploads_are_rate_limited(ci_runs, owner, settings):
    settings.COMMUNITY_RATE_LIMITS = {**settings.COMMUNITY_RATE_LIMITS, "attestation": (2, 3600)}
    api = APIClient()
    _bearer(api, owner)
    codes = [
        api.post(
            "/api/v1/attestations/",
            {"run": "f459ed2b", "kind": "reproduction", "result_file": _file(_real("f459ed2b"))},
            format="multipart",
        ).status_code
        for _ in range(3)
    ]
    assert codes == [201, 201, 429]


def test_benchmark_page_counts_measured_reproductions_per_gpu_product(
    ci_runs, owner, staff, client
):
    """Approved measured reproductions only, per GPU product, with their spread from the
    published medians of that product."""
    for public_id in ("f459ed2b", "708302df"):
        services.reproduction_from_result(
            run=ci_runs[public_id], author=owner, document=_real(public_id)
        )
    assert (
        "Measured reproductions by GPU" not in client.get("/benchmarks/rms_norm/").content.decode()
    )
    services.attestation_moderate(
        attestations=Attestation.objects.all(), moderator=staff, state="approved"
    )
    page = client.get("/benchmarks/rms_norm/").content.decode()
    section = page.split('id="measured-reproductions"')[1].split("</section>")[0]
    # The liger row about -4.1 %, the huggingface row about -0.2 %.
    low, high = sorted(a.delta_percent() for a in Attestation.objects.with_related())
    assert round(low, 1) == -4.1 and round(high, 1) == -0.2
    assert "<td>2</td><td>2</td>" in section
    assert f"{low:.1f} % · {(low + high) / 2:.1f} % · {high:.1f} % (2 compared)" in section
    assert "H200" in section
    other = client.get("/benchmarks/swiglu/").content.decode()
    assert "Measured reproductions by GPU" not in other


def test_moderators_see_the_files_diagnostics_in_the_admin(ci_runs, owner, staff, client):
    from tests.factories_attestations import login_staff

    item = services.reproduction_from_result(
        run=ci_runs["f459ed2b"], author=owner, document=_real("f459ed2b")
    )
    login_staff(client, staff)
    listing = client.get("/admin/attestations/attestation/").content.decode()
    assert "measured with kirunner 0.1.0 on NVIDIA H200 by alice" in listing
    assert "-4.1 % vs published" in listing
    page = client.get(f"/admin/attestations/attestation/{item.pk}/change/").content.decode()
    section = page.split('class="result-diagnostics"')[1].split("</pre>")[0]
    for fact in (
        "device-bound",
        "&quot;smMHz&quot;: 1980",
        "&quot;throttled&quot;: []",
        "&quot;maxAbsErr&quot;",
        "NVIDIA H200",
        "&quot;usedRevision&quot;: &quot;0.6.0&quot;",
    ):
        assert fact in section, fact  # fmt: skip

"""Measured reproductions: a runner's result file of a self-run job, uploaded beside a run.

The file is the user's claim. It is read in this order, each step refusing with its reason
before the next looks deeper:
1. Size: at most COMMUNITY_RESULT_FILE_MAX_BYTES. A request too large to hold a file within
   that is refused from its Content-Length before anything reads it
   (attestations.middleware.RequestSizeMiddleware); the file's own size is checked here.
2. JSON: UTF-8, no NaN or Infinity, nested at most MAX_DEPTH deep.
3. Schema: the self-run RerunResult envelope (kirunner.result_schema), the same payload
   schema a controlled result passes, with no nonce and no signature.
4. What it claims: status ok, a correctness check that passed and whose every check passed,
   the run, cell and workload of the run it is uploaded to, a known GPU for a GPU run.
5. Figures: kirunner.sanity, as controlled results are checked (finite, positive, in order,
   within their ceilings, not below the plausibility floor on the GPU that measured).

What comes out (MeasuredResult) is what the attestation stores: the figures, GPU and software
versions read from the file, never typed. Nothing here touches the run's evidence.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError

from attestations.units import MAX_STORED_VALUE
from kirunner import sanity
from kirunner.canonical import sha256_digest
from kirunner.result_schema import self_run_problem
from runs.models import Gpu, Run
from runs.reference import catalogue, plausibility
from runs.sources.documents import gpu_ensure

MAX_DEPTH = 32
FIELD = "result_file"
SOFTWARE = (("triton", "triton"), ("transformers", "transformers"), ("ligerKernel", "liger-kernel"))


@dataclass(frozen=True)
class MeasuredResult:
    document: dict
    digest: str
    median: int
    p20: int | None
    p80: int | None
    unit: str
    gpu: Gpu | None
    device: str
    device_ns: int | None
    classification: str
    driver_version: str
    cuda_version: str
    torch_version: str
    other_versions: str
    runner_version: str


def refuse(reason: str) -> ValidationError:
    return ValidationError({FIELD: f"This result file is refused: {reason}."})


def too_large(size: int | None) -> bool:
    return size is not None and size > settings.COMMUNITY_RESULT_FILE_MAX_BYTES


def size_refusal() -> ValidationError:
    limit = settings.COMMUNITY_RESULT_FILE_MAX_BYTES
    return refuse(f"it is larger than {limit // 2**20} MiB (a runner's result file is tens of kB)")


def _no_constants(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _shape_problem(value) -> str:
    """Too deep, or a NUL character in a string or key (PostgreSQL refuses it in jsonb), or '';
    walked without recursion."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "it holds a NUL character"
            continue
        if not isinstance(item, dict | list):
            continue
        if depth > MAX_DEPTH:
            return f"it nests deeper than {MAX_DEPTH} levels"
        if isinstance(item, dict):
            stack.extend((key, depth) for key in item)
            stack.extend((child, depth + 1) for child in item.values())
        else:
            stack.extend((child, depth + 1) for child in item)
    return ""


def request_too_large(content_length: str | None) -> bool:
    """A request whose body cannot hold a result file within bounds, told from its header
    before Django reads the body (the form's other fields add at most a few hundred kB)."""
    try:
        length = int(content_length or 0)
    except ValueError:
        return False  # Django itself answers a malformed length
    return length > settings.COMMUNITY_RESULT_FILE_MAX_BYTES + 2**20


def from_upload(upload) -> dict:
    """The document of an uploaded result file (a Django UploadedFile), size checked first."""
    if too_large(upload.size):
        raise size_refusal()
    return load(upload.read(settings.COMMUNITY_RESULT_FILE_MAX_BYTES + 1))


def load(data: bytes) -> dict:
    """The result file's JSON document, or ValidationError with the reason."""
    if too_large(len(data)):
        raise size_refusal()
    try:
        text = data.decode("utf-8")
        document = json.loads(text, parse_constant=_no_constants)
    except UnicodeDecodeError:
        raise refuse("it is not UTF-8 text") from None
    except RecursionError:
        raise refuse(f"it nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise refuse(f"it is not JSON ({str(exc)[:200]})") from None
    problem = _shape_problem(document)
    if problem:
        raise refuse(problem)
    return document


def read(run: Run, document: object) -> MeasuredResult:
    """Check an uploaded result document against `run`; what the attestation stores."""
    problem = self_run_problem(document)
    if problem is not None:
        raise refuse(f"it is not the result of a self-run job ({problem})")
    payload = document["payload"]
    claim = _claim_problem(run, payload)
    if claim:
        raise refuse(claim)
    gpu_spec, gpu = _gpu(payload)
    problems = _figure_problems(run, payload, gpu_spec)
    if problems:
        raise refuse("its figures are not physically possible: " + "; ".join(problems))
    return _measured(run, document, gpu)


def _claim_problem(run: Run, payload: dict) -> str:
    """Why the file is not a passed measurement of this run's cell and workload, or ''."""
    status = payload.get("status")
    if status != "ok":
        return f"its status is {status!r}, not 'ok': {str(payload.get('error') or 'the runner did not measure this run')[:300]}"
    correctness = payload.get("correctness") or {}
    checks = correctness.get("checks")
    if correctness.get("passed") is not True:
        return "its correctness check did not pass"
    if not isinstance(checks, list) or not checks:
        return "its correctness block lists no checks"
    failed = [c for c in checks if not (isinstance(c, dict) and c.get("passed") is True)]
    if failed:
        name = failed[0].get("name") if isinstance(failed[0], dict) else failed[0]
        return f"its correctness block says passed, but check {str(name)[:60]!r} did not pass"
    if (payload.get("run") or {}).get("publicId") != run.public_id:
        return (
            f"it measured run {(payload.get('run') or {}).get('publicId')!r}, not {run.public_id}"
        )
    expected = {
        "benchmark": run.benchmark.slug,
        "pass": run.timed_pass,
        "metric": run.metric,
        "provider": run.implementation.provider_key,
    }
    for name, want in expected.items():
        if payload.get(name) != want:
            return f"its {name} is {str(payload.get(name))[:60]!r}, the run's is {want!r}"
    requested = (payload.get("workload") or {}).get("requested")
    if requested != run.workload.parameters:
        return f"its workload {str(requested)[:200]} is not the run's {run.workload.parameters}"
    return ""


def _gpu(payload: dict) -> tuple[catalogue.GpuSpec | None, Gpu | None]:
    if payload.get("device") != "cuda":
        return None, None
    name = (payload.get("environment") or {}).get("gpuName")
    spec = catalogue.GPUS.get(name) if isinstance(name, str) else None
    if spec is None:
        raise refuse(f"its GPU {str(name)[:80]!r} is not in the index's GPU catalogue")
    # A catalogued GPU no run of the index was measured on yet gets its row, as ingest does.
    return spec, gpu_ensure(spec)


def _figure_problems(run: Run, payload: dict, gpu_spec) -> list[str]:
    """kirunner.sanity's checks, with the floor of the cell on the GPU that measured it."""
    floor = memory = None
    ran = (payload.get("workload") or {}).get("ran")
    if gpu_spec is not None and ran == run.workload.parameters:
        floor = plausibility.floor_ns(
            run.benchmark.slug, run.timed_pass, run.metric, ran, gpu_spec.peak_bandwidth_gbs
        )
        memory = gpu_spec.memory_gib * 2**30 if gpu_spec.memory_gib else None
    return sanity.measurement_problems(
        payload.get("measurement"),
        metric=run.metric,
        floor_ns=floor,
        elapsed_s=sanity.elapsed_seconds(payload.get("startedAt"), payload.get("finishedAt")),
        memory_bytes=memory,
    )


def _stored(value, unit: str) -> int | None:
    if value is None:
        return None
    stored = round(value * sanity.UNIT_SCALE[unit])
    if stored > MAX_STORED_VALUE:
        raise refuse("a figure is larger than the index stores")
    return stored


def _measured(run: Run, document: dict, gpu: Gpu | None) -> MeasuredResult:
    payload = document["payload"]
    m = payload["measurement"]
    env = payload.get("environment") or {}
    classification = (m.get("diagnostics") or {}).get("classification") or {}
    device_ms = classification.get("deviceMs")
    others = ", ".join(f"{label} {env[key]}" for key, label in SOFTWARE if env.get(key))
    runner = payload.get("runner") or {}
    return MeasuredResult(
        document=document,
        digest=sha256_digest(document),
        median=_stored(m["median"], m["unit"]),
        p20=_stored(m.get("p20"), m["unit"]),
        p80=_stored(m.get("p80"), m["unit"]),
        unit=run.unit,
        gpu=gpu,
        device=str(payload["device"]),
        device_ns=_stored(device_ms, "ms") if isinstance(device_ms, int | float) else None,
        classification=str(classification.get("kind") or "")[:16],
        driver_version=str(env.get("driver") or "")[:64],
        cuda_version=str(env.get("cuda") or "")[:64],
        torch_version=str(env.get("torch") or "")[:64],
        other_versions=others[:300],
        runner_version=str(runner.get("version") or "")[:32],
    )

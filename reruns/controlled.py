"""The source `kernelindex`: the job file a runner reads, and the record a verified GPU
result becomes. Like every source it only builds records; they go in through the door of
every upstream file (runs.sources.pipeline.ingest_records: record checks, documents, comparison
group, public id, rank, ledger entry).
"""

from __future__ import annotations

from django.utils.dateparse import parse_datetime

from kirunner.canonical import canonicalize
from runs.evidence import UNIT_SCALE
from runs.manifest import documents
from runs.manifest.canonical import API_VERSION
from runs.models import Run, Source
from runs.reference import catalogue
from runs.sources import pipeline
from runs.sources.base import Doc, InputFile, Measurement, Record
from runs.sources.documents import Resolver
from runs.sources.pipeline import ingest_records

API = API_VERSION
SOURCE = {
    "slug": "kernelindex",
    "name": "KernelIndex controlled reruns",
    "description": (
        "Runs that KernelIndex measured itself on GPUs it controls: each is the verified, "
        "signed result of a rerun job, and the only thing that moves a run's evidence level."
    ),
}
SOFTWARE_KEYS = {
    "driver": "driver",
    "cuda": "cuda",
    "torch": "torch",
    "triton": "triton",
    "transformers": "transformers",
    "ligerKernel": "liger_kernel",
    "liger_kernel": "liger_kernel",
    "python": "python",
}


def _iso(moment) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def job_document(job) -> dict:
    """The JOB.json a runner reads (kirunner.runner.validate_job checks this shape)."""
    header = {
        "id": str(job.uuid),
        "nonce": job.nonce,
        "issuedAt": _iso(job.issued_at) if job.issued_at else None,
        "gpuClass": job.gpu_class,
    }
    return job_document_for(job.run, header)


def job_document_for(run: Run, header: dict) -> dict:
    """The job document of `run` under the job block `header`: a queued job's (id, nonce) or
    a self-run's (reruns/selfrun.py). Everything the runner measures comes from the run."""
    revision = run.implementation.revision
    return {
        "apiVersion": API,
        "kind": "RerunJob",
        "job": header,
        "run": {
            "publicId": run.public_id,
            "source": run.source.slug,
            "externalId": run.external_id,
            "digest": run.digest,
        },
        "benchmark": run.benchmark.slug,
        "pass": run.timed_pass,
        "metric": run.metric,
        "provider": run.implementation.provider_key,
        "implementation": {
            "project": run.implementation.project.slug,
            # null when upstream did not record it: the runner then uses what it has.
            "revision": None if revision == "unknown" else revision,
        },
        "workload": {"parameters": run.workload.parameters},
        "protocol": {
            "family": run.protocol.family,
            "harness": run.source.slug,
            "quantiles": [0.5, 0.2, 0.8],
            # null: the runner uses the rep each upstream script passes (400 for the RoPE
            # kernels, 500, 100 or 10 for others), not one number for all.
            "rep": None,
            "ligerVersion": run.labels.get("liger_version"),
            # The commit upstream's script ran at (a CI row; null for the benchmark CSV's
            # rows): a family whose script changed between commits measures as that commit's
            # script does, whatever the provider (a torch row names no Liger revision).
            "upstreamCommit": run.labels.get("upstream_commit") or None,
        },
    }


def software_of(environment: dict) -> dict:
    out = {}
    for key, name in SOFTWARE_KEYS.items():
        value = environment.get(key)
        if isinstance(value, str | int | float) and not isinstance(value, bool) and value != "":
            out[name] = str(value)
    return out


def _workload(run: Run, ran: dict | None) -> tuple[dict, Doc]:
    """The original workload when the runner ran exactly its parameters, else the one it ran."""
    params = run.workload.parameters
    if not isinstance(ran, dict) or all(ran.get(k) == v for k, v in params.items()):
        workload = run.workload
        return params, Doc(("digest", workload.digest), lambda: (workload.name, workload.label,
                                                                 workload.spec))  # fmt: skip
    ran_params = {k: ran.get(k, v) for k, v in params.items()}
    slug = run.benchmark.slug
    return ran_params, Doc(("ran", slug, repr(sorted(ran_params.items()))),
                           lambda: documents.workload_spec(slug, ran_params)[:3])  # fmt: skip


def ran_parameters(run: Run, payload: dict) -> dict:
    """The workload parameters the result was measured at (the run's, or those it ran)."""
    return _workload(run, (payload.get("workload") or {}).get("ran"))[0]


def _value(measurement: dict, key: str, scale: float) -> int | None:
    value = measurement.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return round(value * scale)
    return None


def _figures(measurement: dict) -> dict:
    """A result's measurement as a record's figures: the median in the run's integer unit, its
    quantiles, and the runner's own numbers verbatim."""
    unit = measurement.get("unit")
    if unit not in UNIT_SCALE or not isinstance(measurement.get("median"), int | float):
        raise ValueError(f"the result has no median with a known unit (unit {unit!r})")
    scale = UNIT_SCALE[unit]
    metric_key = "ms" if unit == "ms" else unit.lower()
    return {
        "value": _value(measurement, "median", scale),
        "statistic": "median",
        "measurements": [
            Measurement("p20", _value(measurement, "p20", scale)),
            Measurement("p80", _value(measurement, "p80", scale)),
        ],
        "source_metrics": {
            f"{metric_key}_20": measurement.get("p20"),
            f"{metric_key}_50": measurement.get("median"),
            f"{metric_key}_80": measurement.get("p80"),
        },
    }


def _setting(original: Run, payload: dict, gpu_spec: catalogue.GpuSpec) -> dict:
    """What the result was measured under: the timing protocol, the GPU and its software."""
    timer = str((payload.get("measurement") or {}).get("timer") or "unknown")
    software = software_of(payload.get("environment") or {})
    timed_pass, metric = original.timed_pass, original.metric
    return {
        "protocol": Doc(
            ("controlled", timed_pass, metric, timer),
            lambda: documents.controlled_protocol_spec(timed_pass, metric, timer),
        ),
        "gpu_name": gpu_spec.upstream_name,
        "environment": Doc(
            ("controlled", gpu_spec.upstream_name, repr(sorted(software.items()))),
            lambda: documents.controlled_environment_spec(gpu_spec, software),
        ),
        "revision": str((payload.get("implementation") or {}).get("usedRevision") or "unknown"),
    }


def _identity(job, payload: dict, gpu_spec: catalogue.GpuSpec) -> dict:
    """The controlled run's names: its identity in the source, its labels, and the job it
    answers (in its spec, so the digest covers which job and which original it measured)."""
    original: Run = job.run
    software = software_of(payload.get("environment") or {})
    labels = {"rerun_of": original.public_id, "gpu_class": job.gpu_class}
    if software.get("liger_kernel"):
        labels["liger_version"] = software["liger_kernel"]
    return {
        "external_id": f"rerun/{job.uuid}",
        "name": f"kernelindex-rerun-{original.public_id}-{str(job.uuid)[:8]}",
        "title": f"{original.title} · controlled rerun on {gpu_spec.upstream_name}",
        "labels": labels,
        "extra_spec": {
            "controlledRerun": {
                "job": str(job.uuid),
                "of": {"publicId": original.public_id, "digest": original.digest},
                "gpuClass": job.gpu_class,
                "device": payload.get("device"),
            }
        },
    }


def controlled_record(*, job, payload: dict, gpu_spec: catalogue.GpuSpec) -> Record:
    """The record of a verified GPU result: the rerun measured the original run's cell."""
    original: Run = job.run
    params, workload = _workload(original, (payload.get("workload") or {}).get("ran"))
    passed = bool((payload.get("correctness") or {}).get("passed"))
    return Record(
        line=0,
        benchmark=original.benchmark.slug,
        timed_pass=original.timed_pass,
        metric=original.metric,
        unit="ns" if original.metric == "latency" else "B",
        **_figures(payload.get("measurement") or {}),
        params=params,
        workload=workload,
        provider=original.implementation.provider_key,
        **_setting(original, payload, gpu_spec),
        observed_at=parse_datetime(payload["finishedAt"]),
        sweep_name=original.sweep_name,
        sweep_value=original.sweep_value,
        status="passed" if passed else "failed",
        **_identity(job, payload, gpu_spec),
    )


def source_ensure() -> Source:
    """The source `kernelindex`, created with the first rerun recorded."""
    return pipeline.source_ensure(
        SOURCE["slug"],
        # No homepage: this site is the source, and a stored origin would be the origin of
        # whichever machine recorded the first rerun.
        {"name": SOURCE["name"], "description": SOURCE["description"], "homepage": ""},
    )


def controlled_run_from(
    *,
    job,
    payload: dict,
    gpu_spec: catalogue.GpuSpec,
    canonical: bytes | None = None,
    source: Source | None = None,
    resolver: Resolver | None = None,
    unranked: set[int] | None = None,
) -> Run:
    """Import the record of a verified GPU result through the door every upstream file goes
    through (runs.sources.pipeline.ingest_records): the record checks, the write and its
    ranking, and a ledger entry of the source `kernelindex`, the fetched bytes being the signed
    payload's. No change detection: it compares a source's publications over time, and those of
    `kernelindex` are days of reruns, whose differences are verdicts, not upstream changes.
    Called inside result_record's transaction; a record the checks refuse raises IngestError
    before anything is written. The run is created at `reported`, as every new run is;
    runs.evidence.evidence_apply then gives it its level with the verdict it carries.

    `canonical`: the payload's RFC 8785 bytes where the caller made them (result_record
    digests them); `source` (source_ensure's), `resolver` and `unranked` (the publications
    left for the caller to rank, ingest_records'): a batch's, shared by its results
    (reruns.services.ResultRecorder). By default this call's own, ranked here."""
    record = controlled_record(job=job, payload=payload, gpu_spec=gpu_spec)
    item = InputFile(
        location=record.external_id,
        data=canonicalize(payload) if canonical is None else canonical,
        # One publication per GPU class and day: the reruns measured together are ranked
        # together (liger beside huggingface on the same H200), as an upstream suite run is.
        publication=f"{job.gpu_class}-{record.observed_at:%Y-%m-%d}",
    )
    ingest_records(
        source=source or source_ensure(),
        item=item,
        records=[record],
        resolver=resolver,
        trigger="rerun",
        unranked=unranked,
        # The recorder's savepoint (ResultRecorder.record), or the re-judging's transaction,
        # rolls the record back with the rest of its result.
        savepoint=False,
    )
    return Run.objects.current_of(source_slug=SOURCE["slug"], external_id=record.external_id)

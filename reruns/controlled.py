"""The two documents of a rerun: the job file a runner reads, and the controlled run a
verified GPU result becomes (source `kernelindex`, its own environment, protocol,
publication, comparison group and digests, built with the same canonical rules as imports).
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils.dateparse import parse_datetime

from runs import catalogue, documents
from runs.canonical import API_VERSION, document_digest, sha256_digest
from runs.evidence import UNIT_SCALE, controlled_run_create
from runs.models import (
    ComparisonGroup,
    Environment,
    Protocol,
    Publication,
    Run,
    Source,
    Workload,
)
from runs.ranking import rank_publication
from runs.services import gpu_ensure, implementation_ensure, public_id_for, workload_ensure

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
    run = job.run
    revision = run.implementation.revision
    return {
        "apiVersion": API,
        "kind": "RerunJob",
        "job": {
            "id": str(job.uuid),
            "nonce": job.nonce,
            "issuedAt": _iso(job.issued_at) if job.issued_at else None,
            "gpuClass": job.gpu_class,
        },
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
        },
    }


def software_of(environment: dict) -> dict:
    out = {}
    for key, name in SOFTWARE_KEYS.items():
        value = environment.get(key)
        if isinstance(value, str | int | float) and not isinstance(value, bool) and value != "":
            out[name] = str(value)
    return out


def _get_or_create(model, kind: str, spec: dict, **defaults):
    obj, _ = model.objects.get_or_create(
        digest=document_digest(kind, spec), defaults={"spec": spec, **defaults}
    )
    return obj


def _workload(run: Run, ran: dict | None) -> Workload:
    """The original workload when the runner ran exactly its parameters, else the one it ran."""
    params = run.workload.parameters
    if not isinstance(ran, dict) or all(ran.get(k) == v for k, v in params.items()):
        return run.workload
    ran_params = {k: ran.get(k, v) for k, v in params.items()}
    return workload_ensure(benchmark=run.benchmark, params=ran_params)


def _value(measurement: dict, key: str, scale: float) -> int | None:
    value = measurement.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return round(value * scale)
    return None


def controlled_run_from(*, job, payload: dict, gpu_spec: catalogue.GpuSpec) -> Run:
    """Create the controlled run of a verified GPU result. Called inside result_record's
    transaction; every document is get-or-create by digest, so equal environments are one."""
    original: Run = job.run
    measurement = payload.get("measurement") or {}
    environment = payload.get("environment") or {}
    unit = measurement.get("unit")
    if unit not in UNIT_SCALE or not isinstance(measurement.get("median"), int | float):
        raise ValueError(f"the result has no median with a known unit (unit {unit!r})")
    scale = UNIT_SCALE[unit]
    run_unit = "ns" if original.metric == "latency" else "B"
    timer = str(measurement.get("timer") or "unknown")

    finished = parse_datetime(payload["finishedAt"])
    with transaction.atomic():
        source, _ = Source.objects.get_or_create(
            slug=SOURCE["slug"],
            defaults={"name": SOURCE["name"], "description": SOURCE["description"],
                      "homepage": settings.SITE_ROOT},
        )  # fmt: skip
        # One publication per GPU class and day: the reruns measured together are ranked
        # together (liger beside huggingface on the same H200), as an upstream suite run is.
        publication, _ = Publication.objects.get_or_create(
            source=source, slug=f"{job.gpu_class}-{finished:%Y-%m-%d}"
        )
        gpu = gpu_ensure(gpu_spec)
        env_name, env_title, env_spec = documents.controlled_environment_spec(
            gpu_spec, software_of(environment)
        )
        env = _get_or_create(
            Environment, "ExecutionEnvironment", env_spec, name=env_name, title=env_title, gpu=gpu
        )
        p_name, p_title, p_spec = documents.controlled_protocol_spec(
            original.timed_pass, original.metric, timer
        )
        protocol = _get_or_create(
            Protocol,
            "BenchmarkProtocol",
            p_spec,
            name=p_name,
            title=p_title,
            family=documents.LIGER_FAMILY,
            harness=p_spec["harness"]["name"],
            timer=timer,
            timed_pass=original.timed_pass,
            metric=original.metric,
        )
        workload = _workload(original, (payload.get("workload") or {}).get("ran"))
        impl_info = payload.get("implementation") or {}
        revision = str(impl_info.get("usedRevision") or "unknown")
        implementation = implementation_ensure(
            provider_key=original.implementation.provider_key, revision=revision
        )

        median = _value(measurement, "median", scale)
        p20 = _value(measurement, "p20", scale)
        p80 = _value(measurement, "p80", scale)
        passed = bool((payload.get("correctness") or {}).get("passed"))
        external_id = f"rerun/{job.uuid}"
        metric_key = "ms" if unit == "ms" else unit.lower()
        spec = {
            "status": "passed" if passed else "failed",
            **(
                {"timing": {"latencyNs": {"median": median}, "primaryStatistic": "median"}}
                if original.metric == "latency"
                else {"memory": {"peakBytes": {"median": median}, "primaryStatistic": "median"}}
            ),
            "observedAt": _iso(finished),
            "measurements": [
                {"unit": run_unit, "value": p20, "metric": original.metric, "statistic": "p20"},
                {"unit": run_unit, "value": p80, "metric": original.metric, "statistic": "p80"},
            ],
            "sourceNative": {
                "source": source.slug,
                "metrics": {
                    f"{metric_key}_20": measurement.get("p20"),
                    f"{metric_key}_50": measurement.get("median"),
                    f"{metric_key}_80": measurement.get("p80"),
                },
                "benchmark": f"{original.benchmark.slug}/{original.timed_pass}",
                "externalId": external_id,
            },
            "controlledRerun": {
                "job": str(job.uuid),
                "of": {"publicId": original.public_id, "digest": original.digest},
                "gpuClass": job.gpu_class,
                "device": payload.get("device"),
            },
            "protocolDigest": protocol.digest,
            "workloadDigest": workload.digest,
            "environmentDigest": env.digest,
            "implementationDigest": implementation.digest,
        }
        cell = {
            "benchmark": original.benchmark.slug,
            "pass": original.timed_pass,
            "metric": original.metric,
            "workloadDigest": workload.digest,
            "environmentDigest": env.digest,
            "family": protocol.family,
            "sweep": original.sweep_name,
        }
        group, _ = ComparisonGroup.objects.get_or_create(
            key=sha256_digest({**cell, "publication": f"{source.slug}/{publication.slug}"}),
            defaults={
                "cell_key": sha256_digest(cell),
                "publication": publication,
                "benchmark": original.benchmark,
                "workload": workload,
                "environment": env,
                "timed_pass": original.timed_pass,
                "metric": original.metric,
                "family": protocol.family,
                "sweep_name": original.sweep_name,
            },
        )
        public_id, attempt = public_id_for(source.slug, external_id), 0
        while Run.objects.filter(public_id=public_id).exists():
            attempt += 1
            public_id = public_id_for(source.slug, external_id, attempt)
        labels = {"rerun_of": original.public_id, "gpu_class": job.gpu_class}
        if liger_version := software_of(environment).get("liger_kernel"):
            labels["liger_version"] = liger_version
        run = controlled_run_create(
            public_id=public_id,
            source=source,
            publication=publication,
            benchmark=original.benchmark,
            implementation=implementation,
            workload=workload,
            protocol=protocol,
            environment=env,
            group=group,
            timed_pass=original.timed_pass,
            metric=original.metric,
            unit=run_unit,
            median=median,
            p20=p20,
            p80=p80,
            source_metrics=spec["sourceNative"]["metrics"],
            sweep_name=original.sweep_name,
            sweep_value=original.sweep_value,
            observed_at=finished,
            status="passed" if passed else "failed",
            labels=labels,
            external_id=external_id,
            name=f"kernelindex-rerun-{original.public_id}-{str(job.uuid)[:8]}",
            title=f"{original.title} · controlled rerun on {gpu_spec.upstream_name}",
            spec=spec,
            digest=document_digest("BenchmarkRun", spec),
        )
        rank_publication(publication)
    return run

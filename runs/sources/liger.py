"""Liger-Kernel's benchmark harness, shared by its two sources (the benchmark CSV kept in the
repository, and the CSVs of its CI runs): parsed CSV rows become records."""

from __future__ import annotations

import functools
import json

from runs.manifest import documents
from runs.reference import catalogue
from runs.sources.base import Doc, InputFile, Measurement, Record, run_name
from runs.sources.parsers import ParsedRow, liger_external_id, parse_liger_csv

LICENSE = "BSD-2-Clause"
REPOSITORY = "https://github.com/linkedin/Liger-Kernel"


@functools.lru_cache(maxsize=64)
def _protocol(timed_pass: str, metric: str) -> Doc:
    return Doc(("liger", timed_pass, metric), lambda: documents.protocol_spec(timed_pass, metric))


@functools.lru_cache(maxsize=64)
def _environment(gpu_name: str) -> Doc:
    spec = catalogue.GPUS.get(gpu_name)
    return Doc(("liger", gpu_name), lambda: documents.environment_spec(spec))


def _workload(benchmark: str, params: dict, frozen: str) -> Doc:
    return Doc((benchmark, frozen), lambda: documents.workload_spec(benchmark, params)[:3])


def records(item: InputFile, *, ci: bool) -> list[Record]:
    rows = parse_liger_csv(item.data, item.location)
    prefix = f"{item.publication}/" if ci else ""
    name_prefix = "liger-ci" if ci else "liger"
    out: list[Record] = []
    slugs: dict[str, str] = {}  # a file names a few hundred workloads in thousands of rows
    for row in rows:
        spec_gpu = catalogue.GPUS.get(row.gpu_name)
        gpu_slug = spec_gpu.slug if spec_gpu else row.gpu_name
        frozen = _freeze(row.params)
        if frozen not in slugs:
            slugs[frozen] = catalogue.workload_slug(row.params)
        workload_slug = slugs[frozen]
        row.external_id = liger_external_id(row, gpu_slug, workload_slug, prefix)
        labels = row.labels
        if ci:
            labels = {**labels, "upstream_commit": item.upstream_commit}
            if item.release:
                labels["release"] = item.release
        stem = row.external_id.removesuffix("/memory").rsplit("/", 1)[0]  # drop the timestamp
        out.append(
            Record(
                line=row.line,
                external_id=row.external_id,
                benchmark=row.benchmark,
                timed_pass=row.timed_pass,
                metric=row.metric,
                unit=row.unit,
                value=row.median,
                statistic="median",
                measurements=[Measurement("p20", row.p20), Measurement("p80", row.p80)],
                source_metrics=row.source_metrics,
                params=row.params,
                workload=_workload(row.benchmark, row.params, frozen),
                provider=row.provider,
                revision=_revision(row, item, ci),
                protocol=_protocol(row.timed_pass, row.metric),
                gpu_name=row.gpu_name,
                environment=_environment(row.gpu_name),
                observed_at=row.observed_at,
                name=_name(name_prefix, stem, row.metric),
                title=f"{catalogue.benchmark_title(row.benchmark)} · {row.raw_provider} · "
                f"{row.timed_pass}" + (" · memory" if row.metric == "memory" else ""),
                labels=labels,
                sweep_name=row.sweep_name,
                sweep_value=row.sweep_value,
            )
        )
    return out


# JSON keeps 1, 1.5, true and "1" apart, and the C encoder is cheap per row (one encoder:
# json.dumps with options builds a new one per call, a third of the cost).
_freeze = json.JSONEncoder(sort_keys=True).encode


def _name(prefix: str, stem: str, metric: str) -> str:
    return run_name(prefix, stem + ("-memory" if metric == "memory" else ""))[:100]


def _revision(row: ParsedRow, item: InputFile, ci: bool) -> str:
    """Liger's own rows name the Liger revision (the CI commit, else the release label); the
    other providers' versions were not recorded upstream."""
    if not row.provider.startswith("liger"):
        return "unknown"
    if ci and item.upstream_commit:
        return item.upstream_commit
    return row.labels.get("liger_version") or "unknown"

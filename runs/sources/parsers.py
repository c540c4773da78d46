"""Parsers for upstream result files. They read and validate; they never touch the database.

Liger-Kernel's harness (`benchmark/scripts/utils.py`) writes one CSV row per measured point:
kernel, provider, operation mode, metric, unit, the swept x, the p50/p20/p80 y values (in that
order), a JSON object of the fixed configuration, the GPU name, a local timestamp with no zone,
and the Liger release. The quirks handled here are all in the shipped files: CRLF line ends,
JSON inside quoted cells, nulls inside that JSON, provider keys spelt with '-' or '_', memory
rows whose "MB" are MiB, and timestamps without a zone.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

from kilib import jsonbounds
from runs.reference import catalogue

LIGER_COLUMNS = [
    "kernel_name",
    "kernel_provider",
    "kernel_operation_mode",
    "metric_name",
    "metric_unit",
    "x_name",
    "x_label",
    "x_value",
    "y_value_50",
    "y_value_20",
    "y_value_80",
    "extra_benchmark_config_str",
    "gpu_name",
    "timestamp",
    "liger_version",
]
PASSES = {"forward", "backward", "full", "no-grad-forward"}
METRICS = {"speed": ("latency", "ms", "ns", 1e6), "memory": ("memory", "MB", "B", 2**20)}


class IngestError(Exception):
    """A file that cannot be imported; `problems` lists (line, message) pairs."""

    def __init__(self, location: str, problems: list[tuple[int, str]]):
        self.location = location
        self.problems = problems
        shown = "; ".join(f"line {line}: {msg}" for line, msg in problems[:10])
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        super().__init__(f"{location}: {shown}{more}")


@dataclass
class ParsedRow:
    line: int
    benchmark: str
    provider: str
    raw_provider: str
    timed_pass: str
    metric: str
    unit: str
    median: int
    p20: int
    p80: int
    source_metrics: dict
    sweep_name: str
    sweep_value: float | None
    params: dict
    gpu_name: str
    observed_at: datetime
    labels: dict = field(default_factory=dict)
    external_id: str = ""


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{what} is not a number: {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{what} is not finite: {text!r}")
    return value


def scaled(value: float, scale: float, what: str) -> int:
    """value * scale as an integer; a ValueError where the product overflows a float (1e308
    ms), instead of round()'s OverflowError. records_check bounds what a column can hold."""
    product = value * scale
    if not math.isfinite(product):
        raise ValueError(f"{what} is out of range: {value!r}")
    return round(product)


def _param_value(value):
    """Integral floats and numeric strings become ints, so "4096", 4096.0 and 4096 agree. A
    number no manifest can carry exactly (nan, inf, beyond 2^53) is a ValueError."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return catalogue.DTYPES.get(value, value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    problem = jsonbounds.value_problem(value)
    if problem:
        raise ValueError(f"a workload parameter is refused: {problem}")
    return value


@functools.lru_cache(maxsize=4096)
def timestamp_slug(observed_at: datetime) -> str:
    return observed_at.strftime("%Y-%m-%d-%H-%M-%S")


@functools.lru_cache(maxsize=4096)
def _parse_timestamp(text: str) -> datetime:
    # The harness writes the runner's local time with no zone; nothing records the zone, so it
    # is read as UTC (the manifests say so in observedAt's trailing Z and the protocol notes).
    # One suite run shares a handful of timestamps, hence the cache.
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)


@functools.lru_cache(maxsize=4096)
def _config_params(text: str) -> dict:
    """The workload parameters of a fixed configuration (copy before adding to it). A suite
    run repeats a few hundred configurations over thousands of rows, hence the cache."""
    try:
        config = jsonbounds.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"extra_benchmark_config_str is not JSON: {exc.msg}") from None
    except jsonbounds.JSONLimitError as exc:
        raise ValueError(f"extra_benchmark_config_str is refused: {exc}") from None
    if not isinstance(config, dict):
        raise ValueError("extra_benchmark_config_str is not a JSON object")
    params: dict = {}
    for key, value in config.items():
        if value is None:  # null in the config: the swept x stands in for it, or it is unset
            continue
        params[catalogue.normalise_param(key)] = _param_value(value)
    return params


def parse_liger_csv(data: bytes, location: str) -> list[ParsedRow]:
    """Parse a whole Liger-Kernel benchmark CSV; raise IngestError listing every bad line."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise IngestError(location, [(1, f"not UTF-8 text ({exc.reason})")]) from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise IngestError(location, [(line, "a NUL byte: this is not a text CSV")])
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        return _parse_liger_rows(reader, location)
    except csv.Error as exc:  # a field over csv's limit (128 KiB): no result cell is that big
        raise IngestError(location, [(reader.line_num, f"not a readable CSV row: {exc}")]) from None


def _parse_liger_rows(reader, location: str) -> list[ParsedRow]:
    header = next(reader, None)
    if header is None:
        raise IngestError(location, [(1, "empty file")])
    if [h.strip() for h in header] != LIGER_COLUMNS:
        missing = sorted(set(LIGER_COLUMNS) - set(header))
        raise IngestError(
            location, [(1, f"unexpected header; missing columns: {', '.join(missing) or 'none'}")]
        )
    rows: list[ParsedRow] = []
    problems: list[tuple[int, str]] = []
    start = reader.line_num + 1
    for cells in reader:
        line = start
        start = reader.line_num + 1
        if not cells or all(not c.strip() for c in cells):
            continue
        try:
            rows.append(_parse_liger_row(cells, line))
        except ValueError as exc:
            problems.append((line, str(exc)))
    if problems:
        raise IngestError(location, problems)
    return rows


def _parse_liger_row(cells: list[str], line: int) -> ParsedRow:
    if len(cells) != len(LIGER_COLUMNS):
        raise ValueError(f"expected {len(LIGER_COLUMNS)} cells, found {len(cells)}")
    r = dict(zip(LIGER_COLUMNS, (c.strip() for c in cells), strict=True))
    for required in ("kernel_name", "kernel_provider", "gpu_name", "timestamp", "y_value_50"):
        if not r[required]:
            raise ValueError(f"{required} is empty")
    mode = r["kernel_operation_mode"]
    if mode not in PASSES:
        raise ValueError(f"unknown operation mode {mode!r}")
    if r["metric_name"] not in METRICS:
        raise ValueError(f"unknown metric {r['metric_name']!r}")
    metric, expected_unit, unit, scale = METRICS[r["metric_name"]]
    if r["metric_unit"] != expected_unit:
        raise ValueError(
            f"unit {r['metric_unit']!r} for {r['metric_name']}, expected {expected_unit}"
        )
    y50 = _number(r["y_value_50"], "y_value_50")
    y20 = _number(r["y_value_20"] or r["y_value_50"], "y_value_20")
    y80 = _number(r["y_value_80"] or r["y_value_50"], "y_value_80")
    params = dict(_config_params(r["extra_benchmark_config_str"] or "{}"))
    try:
        observed = _parse_timestamp(r["timestamp"])
    except ValueError:
        raise ValueError(f"timestamp {r['timestamp']!r} is not YYYY-MM-DD HH:MM:SS") from None

    sweep_name = catalogue.normalise_param(r["x_name"], r["x_label"])
    sweep_value = _param_value(r["x_value"])
    if sweep_value == "":
        raise ValueError("x_value is empty")
    params[sweep_name] = sweep_value

    unit_key = r["metric_unit"].lower()
    return ParsedRow(
        line=line,
        benchmark=r["kernel_name"],
        provider=r["kernel_provider"].lower().replace("-", "_"),
        raw_provider=r["kernel_provider"],
        timed_pass=mode,
        metric=metric,
        unit=unit,
        median=scaled(y50, scale, "y_value_50"),
        p20=scaled(y20, scale, "y_value_20"),
        p80=scaled(y80, scale, "y_value_80"),
        # Verbatim source numbers, keyed the way the example manifest keys them (ms_20 ...).
        source_metrics={f"{unit_key}_20": y20, f"{unit_key}_50": y50, f"{unit_key}_80": y80},
        sweep_name=sweep_name,
        sweep_value=float(sweep_value) if isinstance(sweep_value, int | float) else None,
        params=params,
        gpu_name=r["gpu_name"],
        observed_at=observed,
        labels={"liger_version": r["liger_version"]} if r["liger_version"] else {},
    )


def liger_external_id(row: ParsedRow, gpu_slug: str, workload_slug: str, prefix: str = "") -> str:
    """llama4_rope/forward/huggingface/nvidia-h100-80gb-hbm3/<workload>/2025-08-07-21-42-12

    Memory rows share everything else with the speed row of the same pass and second, so
    they carry a trailing /memory.
    """
    parts = [
        row.benchmark,
        row.timed_pass,
        row.raw_provider,
        gpu_slug,
        workload_slug,
        timestamp_slug(row.observed_at),
    ]
    if row.metric == "memory":
        parts.append("memory")
    return prefix + "/".join(parts)

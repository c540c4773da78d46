"""Workload parameters: normalised names, aliases, dtypes, and the CPU scale-down.

The server maps upstream config keys to normalised names (seq, hidden, q_heads, ...),
but jobs written by hand or by an older server may still carry the upstream spelling
(T, hidden_size, num_q_heads, M, ...). Both are accepted; giving two spellings of one
parameter with different values is an error rather than a silent pick.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DTYPE_NAMES",
    "Param",
    "WorkloadError",
    "normalise_dtype",
    "resolve_params",
]


class WorkloadError(ValueError):
    """The job's workload parameters cannot be mapped to this kernel's inputs."""


# Normalised dtype label -> torch attribute name. Labels are what results carry.
DTYPE_NAMES: dict[str, str] = {"bf16": "bfloat16", "fp32": "float32", "fp16": "float16"}

_DTYPE_ALIASES: dict[str, str] = {
    "bf16": "bf16",
    "bfloat16": "bf16",
    "torch.bfloat16": "bf16",
    "fp32": "fp32",
    "float32": "fp32",
    "float": "fp32",
    "torch.float32": "fp32",
    "torch.float": "fp32",
    "fp16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "torch.float16": "fp16",
    "torch.half": "fp16",
}


def normalise_dtype(value: Any) -> str:
    label = _DTYPE_ALIASES.get(str(value).strip().lower())
    if label is None:
        raise WorkloadError(f"unsupported dtype {value!r}; expected one of bf16, fp32, fp16")
    return label


@dataclass(frozen=True)
class Param:
    """One kernel input parameter: its normalised name and the spellings accepted for it."""

    name: str
    aliases: tuple[str, ...] = ()
    kind: str = "int"  # int (positive) | sint (any integer) | float | bool | str | dtype
    default: Any = None
    required: bool = True
    help: str = ""

    @property
    def spellings(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


@dataclass
class Resolved:
    values: dict[str, Any]
    # Upstream keys the kernel does not use; kept so the result says they were ignored.
    unused: dict[str, Any] = field(default_factory=dict)


def _coerce(param: Param, key: str, raw: Any) -> Any:
    if param.kind == "dtype":
        return normalise_dtype(raw)
    if param.kind in ("int", "sint"):
        if isinstance(raw, bool):
            raise WorkloadError(f"parameter {key!r} must be an integer, got {raw!r}")
        if isinstance(raw, float) and raw.is_integer():
            raw = int(raw)
        if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
            raw = int(raw)
        if not isinstance(raw, int):
            raise WorkloadError(f"parameter {key!r} must be an integer, got {raw!r}")
        if raw <= 0 and param.kind == "int":
            raise WorkloadError(f"parameter {key!r} must be positive, got {raw}")
        return raw
    if param.kind == "bool":
        if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
            raw = raw.strip().lower() == "true"
        if not isinstance(raw, bool):
            raise WorkloadError(f"parameter {key!r} must be true or false, got {raw!r}")
        return raw
    if param.kind == "float":
        try:
            return float(raw)
        except (TypeError, ValueError) as exc:
            raise WorkloadError(f"parameter {key!r} must be a number, got {raw!r}") from exc
    return str(raw)


def resolve_params(
    kernel: str,
    params: tuple[Param, ...],
    given: Mapping[str, Any],
    *,
    derived: Mapping[str, tuple[str, ...]] | None = None,
) -> Resolved:
    """Map the job's parameters onto ``params``.

    ``derived`` lists fallbacks where one parameter may stand in for others: for
    ``{"bt": ("batch", "seq")}`` a job giving only ``bt`` runs with batch=1, seq=bt, which
    is the same computation for these kernels since they only see B*T rows.
    """
    values: dict[str, Any] = {}
    consumed: set[str] = set()
    for p in params:
        found = [(k, given[k]) for k in p.spellings if k in given]
        consumed.update(k for k, _ in found)
        if not found:
            continue
        coerced = {k: _coerce(p, k, v) for k, v in found}
        distinct = set(coerced.values())
        if len(distinct) > 1:
            listing = ", ".join(f"{k}={v!r}" for k, v in coerced.items())
            raise WorkloadError(f"{kernel}: conflicting values for {p.name}: {listing}")
        values[p.name] = distinct.pop()

    for source, targets in (derived or {}).items():
        if source in given and not any(t in values for t in targets):
            bt_param = Param(source)
            total = _coerce(bt_param, source, given[source])
            consumed.add(source)
            values[targets[0]] = 1
            values[targets[1]] = total

    missing = []
    for p in params:
        if p.name in values:
            continue
        if p.required:
            missing.append(p)
        else:
            values[p.name] = p.default
    if missing:
        names = "; ".join(
            f"{p.name} (also accepted as: {', '.join(p.aliases)})" if p.aliases else p.name
            for p in missing
        )
        raise WorkloadError(f"{kernel}: missing workload parameter(s): {names}")
    unused = {k: v for k, v in given.items() if k not in consumed}
    return Resolved(values=values, unused=unused)

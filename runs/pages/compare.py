"""The compare page: two runs' digested specs side by side, and whether they rank together
(no queries here)."""

from __future__ import annotations

from dataclasses import dataclass


def _flatten(value, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        flat: dict[str, object] = {}
        for key in sorted(value):
            flat.update(_flatten(value[key], f"{prefix}.{key}" if prefix else key))
        return flat
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        flat = {}
        for i, item in enumerate(value):
            flat.update(_flatten(item, f"{prefix}[{i}]"))
        return flat
    return {prefix: value}


@dataclass
class DiffRow:
    field: str
    left: object
    right: object

    @property
    def differs(self) -> bool:
        return self.left != self.right


def spec_diff(left: dict, right: dict) -> list[DiffRow]:
    """Every leaf of two digest-covered specs, side by side."""
    a, b = _flatten(left), _flatten(right)
    return [DiffRow(k, a.get(k, "—"), b.get(k, "—")) for k in sorted(set(a) | set(b))]


def comparability(a, b) -> tuple[bool, str]:
    """(comparable, a plain sentence why)."""
    if a.group_id == b.group_id:
        return True, (
            "Comparable: both runs are in the same comparison group (same benchmark, timed pass, "
            "metric, workload, GPU and protocol family, in the same publication), so their "
            "medians rank against each other."
        )
    reasons = []
    if a.benchmark_id != b.benchmark_id:
        reasons.append("they measure different benchmarks")
    if a.timed_pass != b.timed_pass:
        reasons.append("they time different passes")
    if a.metric != b.metric:
        reasons.append("they measure different metrics")
    if a.workload_id != b.workload_id:
        reasons.append("their workloads differ")
    if a.environment_id != b.environment_id:
        reasons.append("they ran on different hardware")
    if a.protocol.family != b.protocol.family:
        reasons.append("their protocols belong to different comparability families")
    if not reasons and a.group.cell_key == b.group.cell_key:
        return False, (
            "Not ranked together: the two runs measure the same cell but come from different "
            "publications (different upstream runs), so they are two points of one history "
            "rather than competitors."
        )
    if not reasons:
        reasons.append("they were swept differently upstream")
    return False, "Not comparable: " + ", ".join(reasons) + "."

"""Units a contributor may type, and their factor to what runs store (ns or bytes)."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

LATENCY_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000}
MEMORY_UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
LABELS = {"ns": "ns", "us": "µs", "ms": "ms", "B": "B", "KiB": "KiB", "MiB": "MiB", "GiB": "GiB"}
ALL_UNITS = [*LATENCY_UNITS, *MEMORY_UNITS]
# Largest stored value (ns or bytes) a contributor may give; services enforce it for every path.
MAX_STORED_VALUE = 10**15


def units_for(stored_unit: str) -> dict[str, int]:
    return MEMORY_UNITS if stored_unit == "B" else LATENCY_UNITS


def to_stored(value: Decimal | None, input_unit: str, stored_unit: str) -> int | None:
    """`value` in `input_unit` as an integer count of `stored_unit`; ValueError on a mismatch."""
    if value is None:
        return None
    units = units_for(stored_unit)
    if input_unit not in units:
        raise ValueError(f"This run is measured in {stored_unit}; use one of {', '.join(units)}.")
    return int((Decimal(value) * units[input_unit]).quantize(Decimal(1), ROUND_HALF_EVEN))

"""Measurements written for reading: nanoseconds and bytes in the unit that suits them.

Pages (through the runs_tags filters) and feeds write a figure through `scale`,
so a median reads the same everywhere.
"""

from __future__ import annotations

_TIME_UNITS = [(1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1, "ns")]
_BYTE_UNITS = [(2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B")]


def _decimals(scaled: float) -> int:
    # Four significant figures at most, enough to tell p20 from p80 apart.
    if scaled >= 100:
        return 1
    if scaled >= 10:
        return 2
    return 3


def scale(value: float | int | None, unit: str, sep: str = " ", digits: int = 0) -> str:
    """385536 ns -> "385.5 µs"; 39007436 B -> "37.2 MiB"; with `digits`, that many
    significant digits (69400 ns, 3 -> "69.4 µs")."""
    if value is None:
        return "—"
    units = _TIME_UNITS if unit == "ns" else _BYTE_UNITS if unit == "B" else [(1, unit)]
    for factor, name in units:
        if abs(value) >= factor or factor == 1:
            if factor == 1:
                return f"{value:g}{sep}{name}"
            scaled = value / factor
            if digits:
                return f"{scaled:.{digits}g}{sep}{name}"
            decimals = 1 if unit == "B" else _decimals(abs(scaled))
            return f"{scaled:.{decimals}f}{sep}{name}"
    return f"{value}{sep}{unit}"  # pragma: no cover - the loop always returns

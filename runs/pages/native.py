"""A source's own numbers (a run's source_metrics, kept verbatim for the manifest) as a reader
reads them: named statistics in the site's units, text without quoting. The template filter
`native_values` (runs_tags) scales them like every other measurement on the page."""

from __future__ import annotations

import re

# Liger's CSV: <unit>_<percentile>, in ms (latency) or MB (memory; MiB, as the ingest scales it).
_PERCENTILE = re.compile(r"^(ms|mb)_(\d+)$")
_UNITS = {"ms": (1e6, "ns"), "mb": (2**20, "B")}
# KernelBench's timing records: statistics in ms, then the trial count and where it ran.
_MS_STATISTICS = ("mean", "std", "min", "max")
_ORDER = [*_MS_STATISTICS, "num_trials", "hardware", "device"]


def significant(value: float) -> int:
    """The significant digits upstream wrote, at most four: KernelBench rounds to three
    (0.0694), Liger's float32 percentiles carry noise past the fourth."""
    digits = f"{abs(value):.15g}".replace(".", "").lstrip("0").split("e")[0]
    return max(1, min(4, len(digits)))


def native_values(metrics: dict) -> list[tuple[str, object, str, int]]:
    """(label, value, unit, significant digits) per source value, in the order a reader
    compares them: a number in the site's base unit (ns, B) with that unit, anything else
    with unit ""."""
    out: list[tuple[str, object, str, int]] = []
    rank = {k: i for i, k in enumerate(_ORDER)}
    for key in sorted(metrics, key=lambda k: (rank.get(k, len(_ORDER)), k)):
        value = metrics[key]
        number = isinstance(value, int | float) and not isinstance(value, bool)
        match = _PERCENTILE.match(str(key).lower())
        if match and number:
            factor, unit = _UNITS[match.group(1)]
            n = match.group(2)
            label = "median" if n == "50" else f"p{n}"
            out.append((label, value * factor, unit, significant(value)))
        elif key in _MS_STATISTICS and number:
            out.append((key, value * 1e6, "ns", significant(value)))
        elif key == "num_trials":
            out.append(("trials", value, "", 0))
        elif isinstance(value, float):
            out.append((str(key).replace("_", " "), f"{value:.4g}", "", 0))
        else:
            out.append((str(key).replace("_", " "), value, "", 0))
    return out

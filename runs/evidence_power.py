"""A cell timed power-capped is judged against the spread we see for its class.

At its power cap the GPU's SM clock goes wherever the power controller puts it (1,470 to
1,980 MHz on the lent H200 within one geglu cell), so the figure of a matmul-heavy cell moves
between processes and days more than upstream's three H200 CI runs show. The runner samples
clocks, power and throttle reasons while it times (kirunner/power.py); a result whose window
ran power-capped is judged against the larger of the cell's upstream tolerance and the
largest deviation we saw between processes and days for power-capped cells of its class
(bench/h200/power_tolerance.py writes data/tolerance/h200-power-capped.json from the signed
results under data/reruns; tests/runs/test_power_rule.py checks the committed table is what the
data gives). A cap below the product's default limit is still no verdict at all
(kirunner.diagnose.throttled): that is a host misconfigured, not a kernel at its rated power.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from kirunner import power

TABLE = Path(__file__).resolve().parent.parent / "data" / "tolerance" / "h200-power-capped.json"
POWER_CAP_BIT = 0x4


@lru_cache(maxsize=1)
def _table() -> dict:
    try:
        return json.loads(TABLE.read_text())
    except FileNotFoundError:
        return {"classes": {}, "rule": "no table"}


def capped_window(measurement: dict) -> dict | None:
    """What says the timing ran power-capped: the sampled window(s), else (a runner before the
    sampler) the NVML reading right after the measurement. None when it did not."""
    windows = measurement.get("power")
    if isinstance(windows, dict):
        capped = {k: w for k, w in windows.items() if power.power_capped(w)}
        return {"sampled": sorted(capped)} if capped else None
    after = ((measurement.get("diagnostics") or {}).get("clocks") or {}).get("after") or {}
    mask = after.get("clockEventReasons") if isinstance(after, dict) else None
    if isinstance(mask, int) and mask & POWER_CAP_BIT:
        return {"nvmlAfter": mask}
    return None


def capped_tolerance(benchmark: str, provider: str) -> tuple[float, str] | None:
    """The class's power-capped tolerance and where it comes from, or None without data."""
    classes = _table().get("classes") or {}
    for key in (f"{benchmark}|{provider}", "any"):
        row = classes.get(key)
        if row:
            where = (
                "its class" if key != "any" else "all power-capped cells (its class has too few)"
            )
            return row["tolerance"], (
                f"timed power-capped: the largest spread of {where} across our own processes "
                f"and days ({row['cells']} cells, {row['observations']} processes' figures)"
            )
    return None


def window_summary(measurement: dict) -> dict:
    """The sampled windows without their raw samples, for an event's facts and the page."""
    out = {}
    for name, window in (measurement.get("power") or {}).items():
        if isinstance(window, dict):
            out[name] = {k: v for k, v in window.items() if k != "samples"}
    return out

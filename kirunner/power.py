"""Clocks, power and throttle reasons *during* a timed window, not only around it.

NVML read just before and just after a measurement sees an idle GPU: on the lent H200 a
matmul-heavy cell (geglu) runs at its 700 W cap with the SM clock at 1,425-1,470 MHz, while the
readings around it say 1,965 MHz. So a thread samples the GPU while the timed loop runs:

- NVML (`nvidia-ml-py`, imported as `pynvml`), every ``interval_s``: SM clock, power draw and
  the clock-event (throttle) reason mask. Each read releases the GIL inside the C call and
  the thread sleeps between reads, so it costs the timing loop a few microseconds per sample.
- Without NVML, ``nvidia-smi --query-gpu=... -lms N`` streamed from a subprocess (coarser:
  the tool's own loop, about 100 ms a line at best).
- Neither: the window says so (``absent``) and the rule treats it as never power-capped.

NVML's power reading on Hopper is a moving average over about a second: it is recorded as
drawn, and the cap is judged from the throttle-reason bit and the SM clock, which are current.

:func:`summarize` turns samples into the recorded window: plain Python, so it runs in CI and on
the server the same way. No Django.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import threading
import time
from typing import Any

from .nvml import started

__all__ = ["POWER_CAP_BIT", "POWER_CAPPED_SHARE", "Sampler", "power_capped", "summarize"]

POWER_CAP_BIT = 0x4
# "off": no sampling thread at all (to time a window without one, as an experiment).
SAMPLER_ENV = "KIRUNNER_POWER_SAMPLER"
# The reason bits kirunner.diagnose names (kept in step with diagnose.THROTTLE_REASONS; a
# module of its own so the sampler imports nothing else).
REASONS = {
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
}
# A window is power-capped when the power-cap bit is set in at least this share of its
# samples: one sample in ten is a transient at the end of a burst, a quarter is the regime.
POWER_CAPPED_SHARE = 0.25
# At most this many raw samples are kept in the result (evenly thinned); the summary uses all.
KEEP_SAMPLES = 120


class Sampler:
    """Context manager: samples from enter to exit on a daemon thread; ``window()`` after."""

    def __init__(self, index: int = 0, interval_s: float = 0.005) -> None:
        self.index = index
        self.interval_s = interval_s
        self.samples: list[tuple[float, int | None, float | None, int | None]] = []
        self.source = "absent"
        self.limits: dict[str, float] = {}
        self.max_sm_mhz: int | None = None
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen | None = None
        self._t0 = 0.0

    def __enter__(self) -> Sampler:
        self._t0 = time.perf_counter()
        if os.environ.get(SAMPLER_ENV) == "off":
            self.source = f"off ({SAMPLER_ENV}=off)"
            return self
        nvml = started()
        if nvml is not None:
            self.source = "NVML (nvidia-ml-py)"
            self._thread = threading.Thread(target=self._nvml_loop, args=(nvml,), daemon=True)
        elif shutil.which("nvidia-smi"):
            self.source = "nvidia-smi -lms"
            self._thread = threading.Thread(target=self._smi_loop, daemon=True)
        if self._thread is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._proc is not None:
            self._proc.terminate()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _nvml_loop(self, nvml: Any) -> None:
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(self.index)
            reasons = (
                getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
            )
            for key, read in (
                ("powerLimitW", nvml.nvmlDeviceGetEnforcedPowerLimit),
                ("defaultPowerLimitW", nvml.nvmlDeviceGetPowerManagementDefaultLimit),
            ):
                try:
                    self.limits[key] = read(handle) / 1000
                except Exception:
                    pass
            try:
                self.max_sm_mhz = nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)
            except Exception:
                pass
            while True:
                t = time.perf_counter() - self._t0
                sm = nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)
                power = nvml.nvmlDeviceGetPowerUsage(handle) / 1000
                self.samples.append((t, sm, power, int(reasons(handle))))
                if self._stop.wait(self.interval_s):
                    break
        except Exception as exc:  # a sampler must never cost the measurement
            self.error = f"{type(exc).__name__}: {exc}"

    def _smi_loop(self) -> None:
        fields = "clocks.sm,power.draw,clocks_event_reasons.active,power.limit,clocks.max.sm"
        try:
            self._proc = subprocess.Popen(
                [
                    "nvidia-smi",
                    f"--id={self.index}",
                    f"--query-gpu={fields}",
                    "--format=csv,noheader,nounits",
                    f"-lms={max(int(self.interval_s * 1000), 20)}",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            for line in self._proc.stdout or []:
                parts = [p.strip() for p in line.split(",")]
                if len(parts) != 5:
                    continue
                self.samples.append(
                    (
                        time.perf_counter() - self._t0,
                        _int(parts[0]),
                        _float(parts[1]),
                        _int(parts[2], 16) if parts[2].startswith("0x") else _int(parts[2]),
                    )
                )
                if _float(parts[3]) is not None:
                    self.limits["powerLimitW"] = _float(parts[3])
                self.max_sm_mhz = _int(parts[4]) or self.max_sm_mhz
                if self._stop.is_set():
                    break
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"

    def window(self) -> dict[str, Any]:
        return summarize(
            self.samples,
            source=self.source,
            interval_s=self.interval_s,
            limits=self.limits,
            max_sm_mhz=self.max_sm_mhz,
            error=self.error,
            duration_s=time.perf_counter() - self._t0,
        )


def _int(text: str, base: int = 10) -> int | None:
    try:
        return int(float(text)) if base == 10 else int(text, base)
    except ValueError:
        return None


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _stats(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def summarize(
    samples: list[tuple[float, int | None, float | None, int | None]],
    *,
    source: str,
    interval_s: float,
    limits: dict[str, float] | None = None,
    max_sm_mhz: int | None = None,
    error: str | None = None,
    duration_s: float | None = None,
) -> dict[str, Any]:
    """The recorded window: SM clock and power (min, median, max), each reason's share of the
    samples, and whether the window ran power-capped. Raw samples thinned to KEEP_SAMPLES."""
    out: dict[str, Any] = {"source": source, "intervalMs": round(interval_s * 1000, 3)}
    if duration_s is not None:
        out["durationMs"] = round(duration_s * 1000, 3)
    if error:
        out["error"] = error[:200]
    if not samples:
        out["n"] = 0
        out["absent"] = (
            "no sample was taken during the window"
            if source != "absent"
            else ("no NVML and no nvidia-smi on this host")
        )
        out["powerCapped"] = False
        return out
    masks = [m for _, _, _, m in samples if isinstance(m, int)]
    shares = {
        name: round(sum(1 for m in masks if m & bit) / len(masks), 4)
        for bit, name in REASONS.items()
        if masks and any(m & bit for m in masks)
    }
    out.update(
        n=len(samples),
        smMHz=_stats([s for _, s, _, _ in samples if isinstance(s, int)]),
        powerW=_stats([p for _, _, p, _ in samples if isinstance(p, int | float)]),
        reasonShares=shares,
        maxSmMHz=max_sm_mhz,
        **(limits or {}),
    )
    out["powerCapped"] = shares.get(REASONS[POWER_CAP_BIT], 0.0) >= POWER_CAPPED_SHARE
    step = max(1, -(-len(samples) // KEEP_SAMPLES))
    out["samples"] = [
        [round(t * 1000, 2), s, None if p is None else round(p, 1), m]
        for t, s, p, m in samples[::step]
    ]
    return out


def power_capped(window: Any) -> bool:
    """Whether a recorded window (or a dict of windows) ran power-capped. Absent: no."""
    if not isinstance(window, dict):
        return False
    if "powerCapped" in window:
        return window.get("powerCapped") is True
    return any(power_capped(w) for w in window.values() if isinstance(w, dict))

"""NVML (`nvidia-ml-py`, imported as `pynvml`), started once per process.

A latency job reads the GPU six times (the clocks and the NVML state before and after, and a
power sampler around each of its two timed windows). Each read used to start NVML and shut it
down again, and every start enumerates the devices. NVML stays valid for the life of the
process once started, so it is started on first use and never shut down: the readings are
the same calls on the same device, without the set-up around each.
"""

from __future__ import annotations

from typing import Any

# The pynvml module NVML was started through, or False where starting it failed. Keyed by the
# module object: a test that swaps `pynvml` for a stand-in starts that one in its turn.
_started: dict[int, Any] = {}


def started() -> Any | None:
    """The pynvml module with NVML started, or None where it is not installed or does not
    start on this host."""
    try:
        import pynvml
    except Exception:  # not installed (or a stand-in that fails to import)
        return None
    key = id(pynvml)
    if key not in _started:
        try:
            pynvml.nvmlInit()
        except Exception:
            _started[key] = False
        else:
            _started[key] = pynvml
    return pynvml if _started[key] is pynvml else None

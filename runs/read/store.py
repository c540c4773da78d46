"""Where cached pages and kept values live: the shared cache (Redis), and a copy in each process
of what it put there or read from it, under the same keys and for no longer. Every key names
the versions its value was computed under and a request reads its versions first, so the copy
can no more serve a stale value than the shared cache: nothing is ever invalidated.

A value is pickled once, here, and both stores hold those bytes, so each reader unpickles a
copy of its own. The copy holds at most BUDGET bytes (least recently used out first) and no
entry over LARGEST. The shared cache is an accelerator: when it fails, pages are rendered.

What pays for the copy: bench/layers.py at 1,001,692 runs (02220a5c, 2026-12-06, in process,
page cache off; docs/performance.md, "What each read-side layer buys"): the run page's
sections, kept in the copy only, make a page of 2.96 ms instead of 15.21 without it; on the
other pages it spares a round trip to Redis per kept part, 1.2-1.4x.
"""

from __future__ import annotations

import logging
import pickle
import threading
import time

from django.core.cache import cache

logger = logging.getLogger(__name__)

BUDGET = 32 * 1024 * 1024
LARGEST = 512 * 1024
# The shared cache's keys for entries of this shape, (expiry as time.time(), pickled value): a
# process of an earlier release sharing the cache during a deploy never reads one.
SHARED = "e1:"
_copy: dict[str, tuple[float, bytes]] = {}  # oldest use first
_held = {"bytes": 0}
_lock = threading.Lock()


def get(key: str, default=None, *, shared: bool = True):
    """The value stored under `key`; with shared=False, only if this process holds it."""
    entry = _copied(key)
    if entry is None and shared:
        entry = _shared(cache.get, SHARED + key)
        if entry is not None and entry[0] > time.time():
            _copy_in(key, entry)
        else:
            entry = None
    return default if entry is None else pickle.loads(entry[1])


def get_many(keys) -> dict:
    """{key: value} of the keys either store holds: one round trip for those not copied."""
    found = {key: entry for key in keys if (entry := _copied(key)) is not None}
    wanted = [key for key in keys if key not in found]
    if wanted:
        now = time.time()
        entries = _shared(cache.get_many, [SHARED + key for key in wanted]) or {}
        for key in wanted:
            entry = entries.get(SHARED + key)
            if entry is not None and entry[0] > now:
                _copy_in(key, entry)
                found[key] = entry
    return {key: pickle.loads(entry[1]) for key, entry in found.items()}


def put(key: str, value, seconds: float, *, shared: bool = True) -> None:
    put_many({key: value}, seconds, shared=shared)


def put_many(values: dict, seconds: float, *, shared: bool = True) -> None:
    """Store the values in the shared cache and this process's copy; with shared=False in the
    copy only (large values seldom asked for twice and cheap to make again in another process:
    a run page's sections, whose 30 KB a round trip to Redis would cost on every cold page)."""
    if seconds <= 0:
        return
    expires = time.time() + seconds
    entries = {k: (expires, pickle.dumps(v, pickle.HIGHEST_PROTOCOL)) for k, v in values.items()}
    if shared:
        _shared(cache.set_many, {SHARED + key: entry for key, entry in entries.items()}, seconds)
    for key, entry in entries.items():
        _copy_in(key, entry)


def clear_copy() -> None:
    with _lock:
        _copy.clear()
        _held["bytes"] = 0


def _shared(method, *args):
    try:
        return method(*args)
    except Exception:  # noqa: BLE001
        logger.warning("page cache unavailable", exc_info=True)
        return None


def _copied(key: str):
    with _lock:
        entry = _copy.pop(key, None)
        if entry is not None and entry[0] <= time.time():
            _held["bytes"] -= len(entry[1])
            return None
        if entry is not None:
            _copy[key] = entry  # now the most recently used
        return entry


def _copy_in(key: str, entry) -> None:
    size = len(entry[1])
    if size > LARGEST:
        return
    with _lock:
        if (old := _copy.pop(key, None)) is not None:
            _held["bytes"] -= len(old[1])
        while _copy and _held["bytes"] + size > BUDGET:
            _held["bytes"] -= len(_copy.pop(next(iter(_copy)))[1])
        _copy[key] = entry
        _held["bytes"] += size

"""Where the pages of the page cache and the values kept for pages (freshness.kept, kept_many)
are stored: the shared cache (Redis), and a copy of what each process put there or read from
it, in that process. A value put with shared=False is kept in that copy only.

Every key stored here names the versions its value was computed under, and a request reads its
versions before it looks anything up (freshness.py), so the process's copy can no more serve a
value after a write to what it read than the shared cache: nothing here is ever invalidated,
and an entry lives no longer in the copy than in the shared cache (the same timeout). The copy
saves the round trip for each kept part (a browse page asks for five, a run page nobody has
opened for its catalogue rows).

A value is pickled once, here, and both stores hold those bytes: each reader unpickles a copy
of its own, so what a page sets on a value it was given never reaches the next reader. The
copy holds at most BUDGET bytes, the least recently used entries going first, and no entry
over LARGEST bytes. The shared cache is an accelerator: when it fails, pages are rendered, not
refused.

What the copy buys (bench/layers.py at 1,001,692 runs, 02220a5c, 2026-12-06, in process, page
cache off): the run page's sections, kept in the copy only, make a page of 2.96 ms instead of
15.2 without it; on the other pages it spares a round trip to Redis per kept part, 1.2-1.4x.
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

# An entry, in either store: (when it expires, as time.time(), the pickled value). The shared
# cache drops it at that time; the copy made from it holds it no longer.
Entry = tuple[float, bytes]
# The shared cache's keys for entries of this shape: a process of an earlier release, sharing
# the cache during a deploy, never reads one, nor a process of this one its values.
SHARED = "e1:"
_copy: dict[str, Entry] = {}  # oldest use first
_held = {"bytes": 0}
_lock = threading.Lock()


def get(key: str, default=None, *, shared: bool = True):
    """The value stored under `key`; with shared=False, only if this process holds it."""
    entry = _copied(key)
    if entry is None:
        if not shared:
            return default
        entry = _shared(cache.get, SHARED + key)
        if entry is None or entry[0] <= time.time():
            return default
        _copy_in(key, entry)
    return pickle.loads(entry[1])


def get_many(keys) -> dict:
    """{key: value} of the keys either store holds: one round trip for those not copied."""
    found = {key: entry for key in keys if (entry := _copied(key)) is not None}
    wanted = [key for key in keys if key not in found]
    if wanted:
        now = time.time()
        shared = _shared(cache.get_many, [SHARED + key for key in wanted]) or {}
        for key in wanted:
            entry = shared.get(SHARED + key)
            if entry is not None and entry[0] > now:
                _copy_in(key, entry)
                found[key] = entry
    return {key: pickle.loads(entry[1]) for key, entry in found.items()}


def put(key: str, value, seconds: float, *, shared: bool = True) -> None:
    put_many({key: value}, seconds, shared=shared)


def put_many(values: dict, seconds: float, *, shared: bool = True) -> None:
    """Store the values in the shared cache and this process's copy; with shared=False, in
    the copy only (values that are large, rarely asked for twice and cheap to make again in
    another process: a run page's sections, freshness.kept)."""
    if seconds <= 0:
        return
    expires = time.time() + seconds
    entries = {
        key: (expires, pickle.dumps(v, pickle.HIGHEST_PROTOCOL)) for key, v in values.items()
    }
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


def _copied(key: str) -> Entry | None:
    with _lock:
        entry = _copy.pop(key, None)
        if entry is None:
            return None
        if entry[0] <= time.time():
            _held["bytes"] -= len(entry[1])
            return None
        _copy[key] = entry  # now the most recently used
        return entry


def _copy_in(key: str, entry: Entry) -> None:
    size = len(entry[1])
    if size > LARGEST:
        return
    with _lock:
        old = _copy.pop(key, None)
        if old is not None:
            _held["bytes"] -= len(old[1])
        while _copy and _held["bytes"] + size > BUDGET:
            _held["bytes"] -= len(_copy.pop(next(iter(_copy)))[1])
        _copy[key] = entry
        _held["bytes"] += size

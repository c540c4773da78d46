"""Where cached pages and kept values live: the shared cache (Redis) and a copy in each process
of what it put there or read from it, under the same keys and for no longer (cachetools'
TLRUCache: at most BUDGET bytes, least recently used out first, no entry over LARGEST). Every
key names the versions its value was computed under and a request reads its versions first,
so the copy can no more serve a stale value than the shared cache: nothing is ever
invalidated. A value is pickled once, here, so each reader unpickles a copy of its own. The
shared cache is an accelerator: when it fails, whatever the backend, pages are rendered.

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

from cachetools import TLRUCache
from django.core.cache import cache

logger = logging.getLogger(__name__)

BUDGET, LARGEST = 32 * 1024 * 1024, 512 * 1024


def copy_of(budget: int) -> TLRUCache:
    """A copy of `budget` bytes, whose entry (expiry as time.time(), pickled value) leaves it
    when the shared cache's does."""
    return TLRUCache(budget, lambda key, e, now: e[0], lambda: time.time(), lambda e: len(e[1]))


copy = copy_of(BUDGET)
_lock = threading.Lock()
# The shared cache's keys for entries of this shape, (expiry as time.time(), pickled value): a
# process of an earlier release sharing the cache during a deploy never reads one.
SHARED = "e1:"


def get(key: str, default=None, *, shared: bool = True):
    """The value stored under `key`; with shared=False, only if this process holds it."""
    return get_many([key], shared=shared).get(key, default)


def get_many(keys, *, shared: bool = True) -> dict:
    """{key: value} of the keys either store holds: one round trip for those not copied."""
    with _lock:
        found = {key: entry for key in keys if (entry := copy.get(key)) is not None}
    wanted = [key for key in keys if key not in found] if shared else []
    if wanted:
        entries = _shared(cache.get_many, [SHARED + key for key in wanted]) or {}
        for key in wanted:
            if (entry := entries.get(SHARED + key)) is not None and _copy_in(key, entry):
                found[key] = entry
    return {key: pickle.loads(data) for key, (_, data) in found.items()}


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
        copy.clear()


def _shared(method, *args):
    try:
        return method(*args)
    except Exception:  # noqa: BLE001
        logger.warning("page cache unavailable", exc_info=True)
        return None


def _copy_in(key: str, entry: tuple[float, bytes]) -> bool:
    """Copy a shared entry in for the rest of its life; False if that is over."""
    if live := entry[0] > time.time():
        if len(entry[1]) <= LARGEST:
            with _lock:
                copy[key] = entry
    return live

"""Counts over all current runs, computed once per data change instead of once per request.

Each count is a scan of every current run (about a second at a million runs), and the
numbers only move when the data does. So they are kept under the data fingerprint
(runs.read.freshness): in the shared cache, where one process's computation serves them all,
and in a per-process copy. Any write to a public table moves the fingerprint (database
triggers), so an import, a rerun or a raw SQL fix all retire the old counts, and nothing that
writes has to remember to refresh them.
"""

from __future__ import annotations

import logging

from django.core.cache import cache
from django.db.models import Max

from runs.models import ComparisonGroup, ImportRecord, Run
from runs.read.freshness import data_fingerprint

logger = logging.getLogger(__name__)

# Keys carry the fingerprint, so an old entry is never read again; the timeout only reclaims it.
CACHE_SECONDS = 24 * 3600
# One (key, counts) pair, replaced whole, so a thread never pairs one key with other counts.
_local: dict = {"entry": (None, None)}


def _home() -> dict:
    counts = Run.objects.public().home_counts()
    counts["groups"] = ComparisonGroup.objects.count()
    imports = ImportRecord.objects.order_by().values_list("source")
    counts["last_import"] = dict(imports.annotate(last=Max("imported_at")))
    return counts


def home() -> dict:
    """The home page's counts (Run.objects.home_counts() plus comparison groups and the latest
    import per source) for the data as it is now."""
    fingerprint, _ = data_fingerprint()
    # Read the fingerprint before the counts: counts computed after it are at least as new as
    # the data it names, so no key ever holds counts older than its fingerprint.
    key = f"counts:home:{fingerprint}"
    held_key, held = _local["entry"]
    if held_key == key:
        return held
    try:
        value = cache.get(key)
    except Exception:  # noqa: BLE001 - the cache is an accelerator; count without it
        logger.warning("counts cache unavailable", exc_info=True)
        value = None
    if value is None:
        value = _home()
        try:
            cache.set(key, value, CACHE_SECONDS)
        except Exception:  # noqa: BLE001
            logger.warning("counts cache unavailable", exc_info=True)
    _local["entry"] = (key, value)
    return value

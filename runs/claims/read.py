"""The judged claims as the pages read them: one query per version of the run data (claims are
written with evidence, in the runs app), kept in the shared cache, then dict lookups, so a page
with a speed-up per row asks nothing per row."""

from __future__ import annotations

from collections import defaultdict

from runs.read.freshness import DATA, cached, cached_key

FIELDS = (
    "id",
    "group_id",
    "verdict",
    "published_ratio",
    "controlled_ratio",
    "device_ratio",
    "tolerance",
    "basis",
    "why",
    "better_id",
    "other_id",
    "better__public_id",
    "other__public_id",
    "better__implementation__display_name",
    "other__implementation__display_name",
    "better__metric",
    "better_controlled__public_id",
    "other_controlled__public_id",
)


def _claim(row: dict) -> dict:
    return {
        "verdict": row["verdict"],
        "published_ratio": row["published_ratio"],
        "controlled_ratio": row["controlled_ratio"],
        "device_ratio": row["device_ratio"],
        "tolerance": row["tolerance"],
        "basis": row["basis"],
        "why": row["why"],
        "better": row["better__implementation__display_name"],
        "other": row["other__implementation__display_name"],
        "better_id": row["better__public_id"],
        "other_id": row["other__public_id"],
        "better_controlled": row["better_controlled__public_id"],
        "other_controlled": row["other_controlled__public_id"],
        "memory": row["better__metric"] == "memory",
    }


def _load() -> dict:
    from runs.claims.models import JudgedClaim

    by_run: dict[int, list[dict]] = defaultdict(list)
    by_group: dict[int, list[dict]] = defaultdict(list)
    for row in JudgedClaim.objects.order_by("severity", "id").values(*FIELDS):
        claim = _claim(row)
        by_run[row["better_id"]].append(claim)
        by_run[row["other_id"]].append(claim)
        by_group[row["group_id"]].append(claim)
    return {"by_run": dict(by_run), "by_group": dict(by_group)}


def of_run(group_id: int, run_id: int) -> list[dict]:
    """The judged claims a run is a side of, those it was published the winner of first: one
    query for the run, instead of loading the whole index. The run page asks only when the
    run has a claim at all (RunQuerySet.run_page_or_404 says)."""
    from runs.claims.models import JudgedClaim

    rows = JudgedClaim.objects.of_run(group_id, run_id).values(*FIELDS)
    claims = [_claim(row) | {"won": row["better_id"] == run_id} for row in rows]
    return sorted(claims, key=lambda c: not c["won"])


# The index as this process last read it, with its key: a benchmark page asks for it once per
# row, and unpickled the whole index each time (a crawl of the demo data: 42.2 ms a benchmark
# page with a query before, 21.3 ms since). The key names the run data's version, so it is
# never served once that moves.
_last: list = [(None, None)]


def index() -> dict:
    """The index, read only: it is shared by every caller in the process."""
    key = cached_key("claims:index", [DATA])
    last_key, value = _last[0]
    if last_key != key:
        value = cached("claims:index", [DATA], _load)
        _last[0] = (key, value)
    return value


def for_run(run_id: int) -> list[dict]:
    return index()["by_run"].get(run_id, [])


def for_group(group_id: int) -> list[dict]:
    return index()["by_group"].get(group_id, [])

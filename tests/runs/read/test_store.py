"""Where pages and kept values are stored (runs/read/store.py): the shared cache and each
process's copy of it, with the same keys and lifetimes, a copy of its own for every reader, a
bound on the copy's size, and never a value whose versions have moved."""

from __future__ import annotations

import pickle

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.models import Run
from runs.read import freshness, store
from tests.factories import RunFactory


@pytest.fixture
def shared_calls(monkeypatch):
    """The lookups store.py makes in the shared cache, as (method, keys)."""
    calls = []
    real = cache.get_many

    def spy(keys):
        calls.append(("get_many", list(keys)))
        return real(keys)

    monkeypatch.setattr(cache, "get_many", spy)
    return calls


def _copied(key: str) -> bool:
    return key in store.copy


def test_every_reader_gets_a_copy_of_its_own():
    store.put("k", {"rows": [1, 2]}, 60)
    first = store.get("k")
    first["rows"].append(3)
    first["seen"] = True
    assert store.get("k") == {"rows": [1, 2]}
    store.clear_copy()  # and so does a reader in a process that takes it from the shared cache
    assert store.get("k") == {"rows": [1, 2]}


def test_an_entry_lives_no_longer_in_either_store_than_its_timeout(monkeypatch):
    now = [2_000_000_000.0]
    monkeypatch.setattr(store.time, "time", lambda: now[0])
    store.put("k", "v", 30)
    now[0] += 29.9
    assert store.get("k") == "v"
    now[0] += 0.2
    assert store.get("k", "gone") == "gone"  # the copy's entry is dropped...
    assert not _copied("k")
    assert store.get_many(["k"]) == {}  # ...and the shared cache's is not taken up again
    store.put("never", "v", 0)  # a page cache turned off keeps nothing anywhere
    assert store.get("never") is None


def test_the_copy_drops_the_least_recently_used_entries_past_its_budget(monkeypatch):
    value = "x" * 1000
    size = len(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
    monkeypatch.setattr(store, "copy", store.copy_of(3 * size))
    for key in "abc":
        store.put(key, value, 60)
    assert store.get("a", shared=False) == value  # a is now the most recently used: b goes first
    store.put("d", value, 60)
    assert [k for k in "abcd" if _copied(k)] == ["a", "c", "d"]
    assert store.copy.currsize == 3 * size
    assert store.get("b") == value  # still in the shared cache, and copied back from it
    assert [k for k in "abcd" if _copied(k)] == ["a", "b", "d"]
    store.put("a", "small", 60)  # replacing an entry gives its bytes back
    assert store.copy.currsize == 2 * size + len(pickle.dumps("small", pickle.HIGHEST_PROTOCOL))


def test_an_entry_over_the_largest_size_is_kept_in_the_shared_cache_only(monkeypatch):
    monkeypatch.setattr(store, "LARGEST", 100)
    store.put_many({"big": "x" * 200, "small": "x" * 10}, 60)
    assert [_copied("big"), _copied("small")] == [False, True]
    assert store.get_many(["big", "small"]) == {"big": "x" * 200, "small": "x" * 10}


@pytest.mark.django_db
def test_kept_values_come_from_the_copy_until_their_versions_move(shared_calls):
    """A kept value read again in this process asks the shared cache nothing; a write to what
    it read gives a new key, so neither store can serve the old value."""
    calls = []

    def compute():
        calls.append(1)
        return ["value", len(calls)]

    assert freshness.cached("t", [freshness.DATA], compute) == ["value", 1]
    assert freshness.cached("t", [freshness.DATA], compute) == ["value", 1]
    assert len(shared_calls) == 1  # the first: not there yet, computed
    RunFactory()
    assert freshness.cached("t", [freshness.DATA], compute) == ["value", 2]
    assert len(shared_calls) == 2


@pytest.mark.django_db
def test_parts_come_from_the_copy_then_the_shared_cache_then_are_built(shared_calls):
    built = []

    def build(ids):
        built.append(sorted(ids))
        return {pk: f"<tr>{pk}</tr>" for pk in ids}

    assert freshness.cached_many("t-row", [1, 2], [freshness.DATA], build) == {
        1: "<tr>1</tr>",
        2: "<tr>2</tr>",
    }
    store.clear_copy()  # another process: 1 and 2 are in the shared cache only
    freshness.cached_many("t-row", [1], [freshness.DATA], build)
    shared_calls.clear()
    parts = freshness.cached_many("t-row", [1, 2, 3], [freshness.DATA], build)
    assert parts == {1: "<tr>1</tr>", 2: "<tr>2</tr>", 3: "<tr>3</tr>"}
    assert built == [[1, 2], [3]]
    assert [(name, len(keys)) for name, keys in shared_calls] == [("get_many", 2)]  # 2 and 3
    assert freshness.cached_many("t-row", [1, 2, 3], [freshness.DATA], build) == parts
    assert len(shared_calls) == 1 and built == [[1, 2], [3]]


@pytest.mark.django_db
def test_a_listing_read_from_the_copy_follows_an_edit_at_once(client, settings, shared_calls):
    """The browse page's rows, options and count come from this process's copy on the second
    request (no query for them, no shared-cache lookup), and show an edit of the run on the
    next one."""
    settings.PAGE_CACHE_SECONDS = 0
    run = RunFactory()
    client.get("/runs/")
    shared_calls.clear()
    with CaptureQueriesContext(connection) as ctx:
        assert f"/runs/{run.public_id}/" in client.get("/runs/").content.decode()
    assert not [q for q in ctx.captured_queries if "runs_benchmark" in q["sql"]]
    assert shared_calls == []
    Run.objects.filter(pk=run.pk).update(rank=37)
    assert '<td class="num">37</td>' in client.get("/runs/").content.decode()


@pytest.mark.django_db
def test_a_cached_page_is_served_from_the_copy_and_retired_with_its_versions(
    client, settings, shared_calls
):
    settings.PAGE_CACHE_SECONDS = 300
    run = RunFactory()
    url = f"/runs/{run.public_id}/"
    assert client.get(url)["X-Page-Cache"] == "miss"
    shared_calls.clear()
    assert client.get(url)["X-Page-Cache"] == "hit"
    assert shared_calls == []
    Run.objects.filter(pk=run.pk).update(rank=41)
    assert client.get(url)["X-Page-Cache"] == "miss"


def test_a_value_kept_in_this_process_only_never_reaches_the_shared_cache(shared_calls):
    store.put("mine", "v", 60, shared=False)
    assert store.get("mine", shared=False) == "v"
    assert cache.get(store.SHARED + "mine") is None
    store.clear_copy()  # another process, or this one once its copy dropped the entry
    assert store.get("mine", "gone", shared=False) == "gone"
    assert store.get("mine", "gone") == "gone"
    store.put("both", "v", 60)
    store.clear_copy()
    shared_calls.clear()
    assert store.get("both", "not asked", shared=False) == "not asked"
    assert shared_calls == []  # a read of this process's copy only asks the shared cache nothing
    assert store.get("both") == "v"


@pytest.mark.django_db
def test_a_run_pages_sections_are_kept_by_the_process_that_rendered_them(
    client, settings, monkeypatch, shared_calls
):
    """Each cold run page would otherwise store its 30 KB in the shared cache for a reader who
    seldom comes to the same process; the process that rendered them serves them again."""
    from runs.querysets import RunQuerySet

    settings.PAGE_CACHE_SECONDS = 0
    reads = []
    real = RunQuerySet.run_page_or_404

    def counted(self, public_id):
        reads.append(public_id)
        return real(self, public_id)

    monkeypatch.setattr(RunQuerySet, "run_page_or_404", counted)
    run = RunFactory()
    url = f"/runs/{run.public_id}/"
    first = client.get(url).content
    key = freshness.cached_key(f"run-page:{run.public_id}", [freshness.DATA])
    assert _copied(key) and cache.get(store.SHARED + key) is None
    shared_calls.clear()
    assert client.get(url).content == first and reads == [run.public_id]
    assert not [keys for _, keys in shared_calls if "run-page" in str(keys)]
    store.clear_copy()  # another process renders them again, and the page is the same
    assert client.get(url).content == first and reads == [run.public_id] * 2

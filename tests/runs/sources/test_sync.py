"""Scheduled sync of an upstream source, against a local HTTP server."""

from __future__ import annotations

import json
import time

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache

from kernelindex.celery import app
from kernelindex.settings import sync_schedule
from runs.models import ImportRecord, Run
from runs.sources.sync import source_sync
from tests.conftest import KERNELBENCH
from tests.upstream_server import upstream_server

pytestmark = pytest.mark.django_db

COMMIT = "423217d9fda91e0c2d67e4a43bf62f96f6d104f1"
PATH = f"/ScalingIntelligence/KernelBench/{COMMIT}/results/timing/H100_Modal/"


def _timings(n: int = 3, bump: float = 0.0) -> bytes:
    """The first n level-1 problems of the shipped eager file (the sync is the subject here)."""
    data = json.loads((KERNELBENCH / "H100_Modal" / "baseline_time_torch.json").read_bytes())
    level1 = dict(list(data["level1"].items())[:n])
    first = next(iter(level1))
    level1[first] = {**level1[first], "mean": level1[first]["mean"] + bump}
    return json.dumps({"level1": level1}, indent=4).encode()


@pytest.fixture
def upstream(settings):
    with upstream_server() as (server, root):
        settings.SOURCE_SYNC = {
            "kernelbench": {
                "locations": [f"{root}{PATH}baseline_time_torch.json"],
                "every": 3600,
                "timeout": 0.3,
            }
        }
        server.routes[PATH + "baseline_time_torch.json"] = ("ok", _timings())
        yield server, root


def test_no_sync_is_scheduled_by_default():
    assert django_settings.SOURCE_SYNC == {}
    assert not [k for k in django_settings.CELERY_BEAT_SCHEDULE if k.startswith("source-sync")]


def test_the_beat_entry_syncs_from_upstream_idempotently(upstream, settings):
    entry = sync_schedule(settings.SOURCE_SYNC)["source-sync-kernelbench"]
    assert entry["schedule"] == 3600.0
    app.loader.import_default_modules()  # what a worker does at start: autodiscover tasks
    task = app.tasks[entry["task"]]
    first = task.apply(args=entry["args"]).get()
    assert first == {"source": "kernelbench", "locked": False, "outcomes": ["created"]}
    assert Run.objects.filter(source__slug="kernelbench").count() == 3
    second = task.apply(args=entry["args"]).get()
    assert second["outcomes"] == ["unchanged"] and Run.objects.count() == 3
    entries = ImportRecord.objects.order_by("id")
    assert [(e.trigger, e.outcome) for e in entries] == [("sync", "created"), ("sync", "unchanged")]
    assert entries[0].upstream_commit == COMMIT and entries[0].location.startswith("http://127.")


def test_a_changed_file_revises_and_the_same_commit_is_a_silent_rewrite(upstream, client):
    server, root = upstream
    source_sync(slug="kernelbench")
    server.routes[PATH + "baseline_time_torch.json"] = ("ok", _timings(bump=0.04))
    assert source_sync(slug="kernelbench").outcomes == ["revised"]
    first, rewrite = ImportRecord.objects.order_by("id")
    assert rewrite.rewrite_of == first and rewrite.revised == 1
    ((public_id, revision),) = rewrite.revised_ids
    assert revision == 2
    page = client.get("/sources/kernelbench/ledger/").content.decode()
    assert "silent rewrite" in page
    assert f"/runs/{public_id}.json?revision=1" in page
    assert f"/runs/{public_id}.json?revision=2" in page
    old = client.get(f"/runs/{public_id}.json?revision=1").json()["run"]["spec"]
    new = client.get(f"/runs/{public_id}.json?revision=2").json()["run"]["spec"]
    assert old["timing"]["latencyNs"]["mean"] + 40_000 == new["timing"]["latencyNs"]["mean"]
    assert client.get(f"/runs/{public_id}.json?revision=x").status_code == 404


def test_failed_fetches_are_ledger_entries_and_the_next_sync_resumes(upstream, settings):
    server, root = upstream
    names = ["missing.json", "truncated.json", "slow.json"]
    settings.SOURCE_SYNC["kernelbench"]["locations"] = [
        f"{root}{PATH}baseline_time_torch.json",
        *(f"{root}/{name}" for name in names),
    ]
    server.routes["/truncated.json"] = ("truncate", _timings())
    server.routes["/slow.json"] = ("slow", _timings())
    started = time.monotonic()
    assert source_sync(slug="kernelbench").outcomes == ["created", "failed", "failed", "failed"]
    assert time.monotonic() - started < 5
    errors = list(ImportRecord.objects.filter(outcome="failed").order_by("id"))
    assert [e.location.rsplit("/", 1)[1] for e in errors] == names
    assert "HTTP 404" in errors[0].error
    assert "truncated download" in errors[1].error
    assert "timed out" in errors[2].error
    assert Run.objects.count() == 3
    # Upstream recovers: the next sync fetches what failed and finds the rest unchanged.
    settings.SOURCE_SYNC["kernelbench"]["locations"] = [
        f"{root}{PATH}baseline_time_torch.json",
        f"{root}/H100_Modal/baseline_time_torch_compile_inductor_default.json",
    ]
    server.routes["/H100_Modal/baseline_time_torch_compile_inductor_default.json"] = (
        "ok",
        _timings(),
    )
    assert source_sync(slug="kernelbench").outcomes == ["unchanged", "created"]
    assert Run.objects.count() == 6


def test_two_syncs_of_one_source_never_overlap(upstream):
    cache.add("runs:source-sync:kernelbench", "held by another worker", timeout=60)
    try:
        outcome = source_sync(slug="kernelbench")
    finally:
        cache.delete("runs:source-sync:kernelbench")
    assert outcome.locked and outcome.outcomes == []
    assert not ImportRecord.objects.exists()
    assert source_sync(slug="kernelbench").outcomes == ["created"]

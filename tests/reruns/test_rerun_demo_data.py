"""Real signed rerun results load, verify and become controlled runs: the demo batches under
data/reruns/<batch>/ (when the repository has them) and tests/data/reruns/h200-2026-11-29,
two real H200 results made with kirunner for this test (llama4_rope and rope, huggingface,
forward), signed with a public test key."""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from io import StringIO
from itertools import pairwise
from pathlib import Path

import pytest
from django.core.management import call_command

from reruns.models import JobState, RerunJob
from runs.manifest.canonical import document_digest, run_manifest
from runs.models import Evidence, EvidenceEvent
from runs.sources.pipeline import ingest

DATA = Path(__file__).resolve().parents[2] / "data"
FIXTURE = Path(__file__).resolve().parents[1] / "data" / "reruns" / "h200-2026-11-29"
FOLDERS = sorted(p for p in (DATA / "reruns").glob("*") if p.is_dir())
# The folders `manage.py demo` loads (reruns.demo): one whose jobs all wait in unrun/ (issued,
# none run yet) has nothing to load.
DEMO_BATCHES = [p for p in FOLDERS if any(p.glob("jobs/*.json"))]


def _documents(batch: Path, kind: str) -> list[dict]:
    docs = []
    for path in sorted(batch.rglob("*.json")):
        # Repeated runs of the same jobs, jobs the batch did not reach, and results held back
        # until their check can judge them (data/reruns/README.md) are data, not loaded.
        if {"repeats", "unrun", "held"} & set(path.relative_to(batch).parts):
            continue
        doc = json.loads(path.read_text())
        if isinstance(doc, dict) and doc.get("kind") == kind:
            docs.append(doc)
    return docs


def _held(batch: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(batch.glob("held/results/*.json"))]


def _ingest_upstream(jobs: list[dict]) -> None:
    """The upstream rows a batch's jobs name: the Liger benchmark CSV, the CI folders."""
    sources = {j["run"]["source"] for j in jobs}
    if "liger-kernel-bench" in sources:
        ingest(
            source_slug="liger-kernel-bench",
            locations=[str(DATA / "liger" / "all_benchmark_data.csv")],
        )
    ci_folders = {
        j["run"]["externalId"].split("/", 1)[0]
        for j in jobs
        if j["run"]["source"] == "liger-kernel-ci"
    }
    if ci_folders:
        ingest(
            source_slug="liger-kernel-ci",
            locations=[str(DATA / "liger-ci" / f) for f in sorted(ci_folders)],
        )


@pytest.mark.parametrize("batch", DEMO_BATCHES, ids=[b.name for b in DEMO_BATCHES])
def test_demo_batch_loaded_into_controlled_runs(demo_db, batch, client):
    """Each batch of data/reruns as `manage.py demo` left it: loaded after every batch before it,
    over every upstream source (the demo database, tests/conftest.py)."""
    _check_loaded(batch, client)


def test_fixture_batch_loads_into_controlled_runs(db, client):
    """The fixture batch (not in the demo) loaded alone, over only the upstream rows it names."""
    _ingest_upstream(_documents(FIXTURE, "RerunJob"))
    call_command("rerun", "load-demo", str(FIXTURE), stdout=StringIO(), stderr=StringIO())
    _check_loaded(FIXTURE, client)


def _check_loaded(batch: Path, client) -> None:
    """Every job of a loaded batch: queued without a result; else succeeded or failed with its
    receipt, a GPU result's controlled run, the evidence event it moved; nothing held back
    loaded; loading it again records nothing."""
    jobs = _documents(batch, "RerunJob")
    assert jobs, f"{batch} holds no job files"
    results = {r["payload"]["job"]["id"]: r["payload"] for r in _documents(batch, "RerunResult")}
    # What the checks read, in a few queries for the whole batch (2,741 jobs in the largest):
    # the jobs with their runs, receipts and controlled runs with every document the manifest
    # pins, and the evidence events of all their runs in the order a run's own manager gives.
    controlled_docs = ("source", "environment__gpu", "benchmark", "protocol", "workload",
                       "implementation")  # fmt: skip
    loaded = RerunJob.objects.select_related(
        "run",
        "receipt__evidence_event",
        *(f"receipt__controlled_run__{d}" for d in controlled_docs),
    ).in_bulk([doc["job"]["id"] for doc in jobs], field_name="uuid")
    events_of = defaultdict(list)
    for event in EvidenceEvent.objects.filter(run__in={job.run_id for job in loaded.values()}):
        events_of[event.run_id].append(event)
    # A controlled run's page is read for one run of each kernel and metric the batch measured:
    # the page's sections differ by those (the crawl reads pages of every source and level).
    pages = {}
    for doc in jobs:
        job = loaded[uuid.UUID(doc["job"]["id"])]
        payload = results.get(doc["job"]["id"])
        if payload is None:
            assert job.state == JobState.QUEUED
            continue
        assert job.state in (JobState.SUCCEEDED, JobState.FAILED)
        receipt = job.receipt
        if job.state == JobState.FAILED:
            # The runner could not run it, or the result could carry no verdict: nothing moved.
            assert job.error.startswith(("the runner reported", "no verdict: "))
            assert receipt.controlled_run is None and receipt.evidence_event is None
            continue
        if payload.get("device") == "cuda" and payload.get("status") in ("ok", "incorrect"):
            controlled = receipt.controlled_run
            assert controlled.source.slug == "kernelindex"
            assert controlled.evidence == Evidence.CONTROLLED
            assert controlled.environment.gpu.upstream_name == payload["environment"]["gpuName"]
            manifest = run_manifest(controlled)
            assert document_digest("BenchmarkRun", manifest["run"]["spec"]) == controlled.digest
            assert controlled.spec["environmentDigest"] == controlled.environment.digest
            pages.setdefault((controlled.benchmark.slug, controlled.metric), controlled)
        if receipt.evidence_event:
            assert receipt.evidence_event.run_id == job.run_id
            # The run kept this event's level until its next event (a batch loaded after it in
            # the demo may move the run again), and has its latest event's level (the run as
            # read above, after every batch was loaded).
            events = events_of[job.run_id]
            since = events[events.index(receipt.evidence_event) :]
            for event, following in pairwise(since):
                assert following.from_level == event.to_level, (event.pk, following.pk)
            assert job.run.evidence == since[-1].to_level
    for controlled in pages.values():
        page = client.get(controlled.get_absolute_url()).content.decode()
        assert "This run is itself a KernelIndex-controlled rerun" in page, controlled.public_id
    # Nothing held back was loaded.
    held = [d["payload"]["job"]["id"] for d in _held(batch)]
    assert not RerunJob.objects.filter(uuid__in=held).exists()
    # Loading again changes nothing.
    out = StringIO()
    call_command("rerun", "load-demo", str(batch), stdout=out, stderr=StringIO())
    assert "0 result(s) recorded" in out.getvalue()


def test_h200_fixture_verdicts(db):
    """The example run (H100) is only checked by an H200. The upstream H200 rope row's result
    predates the runner's device-time diagnostics: its do_bench figure cannot tell a slow host
    from a slow kernel, so it stays `checked` and says why (results of older runners still
    verify and load)."""
    ingest(
        source_slug="liger-kernel-bench", locations=[str(DATA / "liger" / "all_benchmark_data.csv")]
    )
    ingest(source_slug="liger-kernel-ci", locations=[str(DATA / "liger-ci" / "02bac05")])
    call_command("rerun", "load-demo", str(FIXTURE), stdout=StringIO(), stderr=StringIO())
    from runs.models import Run

    example = Run.objects.public().get(public_id="8827e3bb")
    rope_h200 = Run.objects.public().get(public_id="67d207cf")
    assert example.evidence == Evidence.CHECKED
    assert rope_h200.evidence == Evidence.CHECKED
    facts = rope_h200.evidence_events.get().facts
    assert facts["gpuProduct"] == facts["originalGpuProduct"] == "NVIDIA H200"
    assert "no device time was recorded" in facts["why"]
    controlled = rope_h200.evidence_events.get().controlled_run
    assert controlled.environment.spec["hardware"]["product"] == "NVIDIA H200"
    assert controlled.environment.spec["software"]["driver"]
    assert controlled.protocol.timer == "cuda_events"
    assert controlled.rank == 1 and controlled.group.size == 1


def test_h200_batch_pages_say_why(db, client, tmp_path):
    """Four results of the 2026-11-30 batch, each with a different reason, as a reader sees
    them: the example (H100) checked by an H200 with its device time; a host-bound cell; a
    reproduced cell; a published figure its source's host dominated."""
    batch = DATA / "reruns" / "h200-2026-11-30"
    names = [
        "004-llama4_rope-forward-latency-liger",
        "122-layer_norm-forward-latency-liger",
        "209-rope-forward-latency-huggingface",
        "015-cross_entropy-backward-latency-huggingface",
    ]
    (tmp_path / "jobs").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "worker-key.json").write_text((batch / "worker-key.json").read_text())
    for name in names:
        for kind in ("jobs", "results"):
            (tmp_path / kind / f"{name}.json").write_text(
                (batch / kind / f"{name}.json").read_text()
            )
    ingest(
        source_slug="liger-kernel-bench", locations=[str(DATA / "liger" / "all_benchmark_data.csv")]
    )
    ingest(source_slug="liger-kernel-ci", locations=[str(DATA / "liger-ci" / "02bac05")])
    call_command("rerun", "load-demo", str(tmp_path), stdout=StringIO(), stderr=StringIO())

    def page_of(name):
        doc = json.loads((tmp_path / "jobs" / f"{name}.json").read_text())
        return client.get(f"/runs/{doc['run']['publicId']}/").content.decode()

    example, host_bound, reproduced, dominated = (page_of(n) for n in names)
    assert "measured on another GPU product: NVIDIA H200 device time" in example
    assert "evidence-checked" in example
    assert "host-bound on our runner: device time" in host_bound
    assert "Cold device time" in host_bound and "Host enqueue time per call" in host_bound
    assert "host-bound: our do_bench figure timed the host" in host_bound
    assert "evidence-reproduced" in reproduced and "Tolerance" in reproduced
    assert "across upstream CI runs" in reproduced  # where the tolerance came from
    assert "the source's benchmark host dominated it" in dominated
    # The benchmark page marks that number where it shows it.
    query = "source=liger-kernel-ci&gpu=nvidia-h200&pass=backward&metric=latency"
    response = client.get(f"/benchmarks/cross_entropy/?{query}")
    assert response.status_code == 200, response.content.decode()[:2000]
    assert "host-dominated (5.1× device time)" in response.content.decode()


def test_every_job_left_to_run_is_a_job_the_runner_takes():
    """unrun/ is the resumable list a closing note points at: each file there must be a job
    this runner accepts for an upstream source, so `run.sh --jobs <batch>/unrun` resumes."""
    from kirunner.runner import support_problem

    left = sorted(p for batch in FOLDERS for p in batch.glob("unrun/*.json"))
    assert left, "no batch keeps jobs left to run"
    problems = []
    for path in left:
        doc = json.loads(path.read_text())
        problem = support_problem(doc)
        if problem is None and doc["run"]["source"] not in (
            "liger-kernel-ci",
            "liger-kernel-bench",
        ):
            problem = f"source {doc['run']['source']!r} is no upstream source"
        if problem is not None:
            problems.append(f"{path.relative_to(DATA)}: {problem}")
    assert problems == []


def test_demo_skips_a_batch_whose_jobs_all_wait_in_unrun(tmp_path, monkeypatch):
    """`manage.py demo` loads every batch folder; one that holds only jobs left to run (no
    results, so no key) must not stop the demo."""
    from reruns import demo

    (tmp_path / "reruns" / "ran" / "jobs").mkdir(parents=True)
    (tmp_path / "reruns" / "ran" / "jobs" / "001-x.json").write_text("{}")
    (tmp_path / "reruns" / "waiting" / "unrun").mkdir(parents=True)
    (tmp_path / "reruns" / "waiting" / "unrun" / "001-x.json").write_text("{}")
    loaded = []
    monkeypatch.setattr(demo, "call_command", lambda *args: loaded.append(Path(args[-1]).name))
    demo.load(tmp_path)
    assert loaded == ["ran"]


def _cannot_judge(*args, **kwargs):
    from runs.evidence import NoVerdict

    raise NoVerdict("the rule of the moment cannot judge it")


def _load_undecided(tmp_path: Path, monkeypatch) -> RerunJob:
    """One real H100 result of the batch, recorded while the rule could not judge it."""
    from reruns import services

    batch = DATA / "reruns" / "h100-2026-12-05"
    name = "0010-rms_norm-backward-latency-liger"
    for kind in ("jobs", "results"):
        (tmp_path / kind).mkdir()
        (tmp_path / kind / f"{name}.json").write_text((batch / kind / f"{name}.json").read_text())
    (tmp_path / "worker-key.json").write_text((batch / "worker-key.json").read_text())
    _ingest_upstream(_documents(tmp_path, "RerunJob"))
    with monkeypatch.context() as m:
        m.setattr(services, "_outcome", _cannot_judge)
        call_command("rerun", "load-demo", str(tmp_path), stdout=StringIO(), stderr=StringIO())
    return RerunJob.objects.select_related("run", "receipt").get()


def test_a_result_that_carried_no_verdict_is_decided_by_a_later_rejudge(db, tmp_path, monkeypatch):
    """A real H100 result recorded while the rule could not judge it (the job fails with "no
    verdict: ...", no controlled run, no event) is what `manage.py rerun rejudge` reaches once
    the rule can: the run gets its verdict, the result its controlled run and event, as
    recording it then would have given."""
    from reruns import services
    from runs.models import Run

    job = _load_undecided(tmp_path, monkeypatch)
    run, receipt = job.run, job.receipt
    assert job.state == JobState.FAILED and job.error.startswith("no verdict: ")
    assert receipt.evidence_event is None and receipt.controlled_run is None
    assert run.evidence == Evidence.REPORTED
    assert services.rejudge_candidates() == [run.pk]

    out = StringIO()
    call_command("rerun", "rejudge", stdout=out)
    run.refresh_from_db()
    receipt.refresh_from_db()
    assert run.evidence not in (Evidence.REPORTED, Evidence.INCORRECT), out.getvalue()
    assert receipt.evidence_event.run == run and receipt.evidence_event.to_level == run.evidence
    assert receipt.job.state == JobState.SUCCEEDED and receipt.job.error == ""
    controlled = receipt.controlled_run
    assert controlled.evidence == Evidence.CONTROLLED
    assert controlled.environment.gpu.upstream_name == "NVIDIA H100 80GB HBM3"
    assert Run.objects.filter(source__slug="kernelindex").count() == 1
    # The same rule again: nothing more is written.
    events = run.evidence_events.count()
    call_command("rerun", "rejudge", stdout=StringIO())
    assert run.evidence_events.count() == events


def test_a_run_no_result_ever_moved_is_left_as_it_is_by_rejudge(db, tmp_path, monkeypatch):
    """Still undecided under the rule as it stands: no event, the run stays `reported`."""
    from reruns import services

    job = _load_undecided(tmp_path, monkeypatch)
    monkeypatch.setattr(services, "_outcome", _cannot_judge)
    assert services.run_rejudge(run=job.run) == "no verdict"
    assert not job.run.evidence_events.exists()

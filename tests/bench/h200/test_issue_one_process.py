"""bench/h200/issue_jobs.py's `one-process-h200` selection: the latency rows of upstream CI's
02bac05 H200 run that fewer than two independent runner processes have timed, and the
round-robin order that lets a batch cut short still cover every kernel."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from runs.evidence import Outcome, evidence_apply
from runs.models import Evidence
from runs.sources.pipeline import ingest
from tests.conftest import LIGER_CI
from tests.factories import RunFactory, SourceFactory
from tests.kirunner.issued import issue_jobs_module


def _timed(run, process):
    """Record one controlled result of `run` from runner process `process`."""
    controlled = RunFactory(source=SourceFactory(slug="kernelindex"))
    outcome = Outcome(Evidence.CHECKED, {"process": process, "metric": run.metric})
    evidence_apply(run=run, controlled_run=controlled, outcome=outcome, cause="test")


@pytest.mark.django_db
def test_rows_timed_by_fewer_than_two_processes():
    ingest(source_slug="liger-kernel-ci", locations=[str(LIGER_CI / "02bac05")])
    issue = issue_jobs_module()
    rows = [r for r in issue.selected_all_h200() if r.benchmark.slug == "rms_norm"]
    latency = [r for r in rows if r.metric == "latency"]
    memory = [r for r in rows if r.metric == "memory"]
    assert latency and memory
    twice, once, same_process_twice = latency[:3]
    _timed(twice, "p1")
    _timed(twice, "p2")
    _timed(once, "p1")
    _timed(same_process_twice, "p1")
    _timed(same_process_twice, "p1")

    picked = {r.pk for r in issue.selected_one_process_h200() if r.benchmark.slug == "rms_norm"}

    assert twice.pk not in picked
    assert {once.pk, same_process_twice.pk} <= picked
    # Never timed at all: picked too. Memory readings repeat to the byte: never picked.
    assert {r.pk for r in latency[3:]} <= picked
    assert not picked & {r.pk for r in memory}


def test_interleaved_is_round_robin_over_kernel_in_order():
    def run(slug, n):
        return SimpleNamespace(benchmark=SimpleNamespace(slug=slug), n=n)

    runs = [run("a", 1), run("a", 2), run("a", 3), run("b", 1), run("c", 1), run("c", 2)]
    order = [(r.benchmark.slug, r.n) for r in issue_jobs_module().interleaved(runs)]
    assert order == [("a", 1), ("b", 1), ("c", 1), ("a", 2), ("c", 2), ("a", 3)]

"""Reproduce on your GPU: every run of every source gets a self-run job file that the runner
accepts, or the reason the runner cannot reproduce it, over the demo data: the Liger benchmark
CSV, a Liger CI run, KernelBench and the controlled reruns of the H200 demo batch."""

from __future__ import annotations

import hashlib
import html
import io
import json
import shutil
import zipfile
from collections import Counter
from io import StringIO

import pytest
from django.core.management import call_command

import kirunner
from kilib.origin import site_root
from kirunner.result_schema import result_problem
from kirunner.runner import support_problem, validate_job
from reruns import controlled, selfrun
from reruns.models import RerunJob
from runs.models import Run
from runs.sources.pipeline import ingest
from tests.conftest import DATA, KERNELBENCH, LIGER_CI, LIGER_CSV, rows_for_the_module

DEMO_BATCH = DATA / "reruns" / "h200-2026-11-29"


@pytest.fixture(scope="module")
def _every_source_ingested(request, django_db_setup, django_db_blocker):
    with rows_for_the_module(request, django_db_blocker, _ingest_every_source):
        yield


@pytest.fixture
def every_source(_every_source_ingested, db):
    """Every shipped source and the demo batch (loaded once for the module:
    tests/conftest.py, rows_for_the_module)."""


def _ingest_every_source() -> None:
    ingest(source_slug="liger-kernel-bench", locations=[str(LIGER_CSV)])
    # The CI folders the demo batch's jobs name (the controlled runs need their originals).
    folders = set()
    for path in DEMO_BATCH.rglob("*.json"):
        doc = json.loads(path.read_text())
        if doc.get("kind") == "RerunJob" and doc["run"]["source"] == "liger-kernel-ci":
            folders.add(doc["run"]["externalId"].split("/", 1)[0])
    folders = folders or {sorted(p.name for p in LIGER_CI.iterdir() if p.is_dir())[0]}
    ingest(source_slug="liger-kernel-ci", locations=[str(LIGER_CI / f) for f in sorted(folders)])
    ingest(source_slug="kernelbench", locations=[str(KERNELBENCH)])
    call_command("rerun", "load-demo", str(DEMO_BATCH), stdout=StringIO(), stderr=StringIO())


def test_every_run_of_every_source_has_a_job_file_or_a_reason(every_source):
    runs = list(Run.objects.public().with_related())
    seen: Counter = Counter()
    for run in runs:
        reproduce = selfrun.reproduce_for(run)
        job = selfrun.self_run_job(run)
        supported = reproduce.problem is None
        seen[(run.source.slug, supported)] += 1
        if not supported:
            assert reproduce.problem and support_problem(job) == reproduce.problem
            continue
        spec = validate_job(job)  # the runner reads it as it reads a worker's job
        assert spec["self_run"] and spec["nonce"] is None
        assert spec["benchmark"] == run.benchmark.slug and spec["parameters"]
        assert job["run"]["digest"] == run.digest
    sources = {source for source, _ in seen}
    assert sources == {"liger-kernel-bench", "liger-kernel-ci", "kernelbench", "kernelindex"}
    # Liger's seven re-measurable kernels are offered in every Liger source and the controlled
    # reruns; KernelBench's harness is not the runner's protocol, so none of its runs is.
    for source in ("liger-kernel-bench", "liger-kernel-ci", "kernelindex"):
        assert seen[(source, True)] > 0, seen
    assert seen[("kernelbench", True)] == 0 and seen[("kernelbench", False)] == 500


def test_kernelbench_and_unsupported_liger_runs_say_why(every_source, client):
    kb = Run.objects.public().filter(source__slug="kernelbench").first()
    reason = selfrun.reproduce_for(kb).problem
    assert "protocol family" in reason and "liger_kernel_bench" in reason
    page = client.get(kb.get_absolute_url()).content.decode()
    assert "Reproduce on your GPU" in page and "The runner cannot reproduce this run" in page
    answer = client.get(f"/runs/{kb.public_id}/job.json")
    assert answer.status_code == 404
    # A kernel the runner does not implement (not in kirunner.kernels.KERNELS).
    other = Run.objects.public().filter(benchmark__slug="fused_moe")
    assert "not supported by this runner" in selfrun.reproduce_for(other.first()).problem


def test_job_file_and_commands_from_the_page_for_each_source(every_source, client):
    for source in ("liger-kernel-bench", "liger-kernel-ci", "kernelindex"):
        for provider in ("liger", "huggingface"):
            run = next(
                r
                for r in Run.objects.public().with_related().filter(
                    source__slug=source, implementation__provider_key=provider,
                    benchmark__slug__in=["rms_norm", "rope", "llama4_rope", "swiglu",
                                         "geglu", "layer_norm", "cross_entropy"],
                )
                if selfrun.reproduce_for(r).problem is None
            )  # fmt: skip
            page = client.get(run.get_absolute_url()).content.decode()
            assert f'href="/runs/{run.public_id}/job.json"' in page
            assert (
                f"kirunner run job-{run.public_id}.json --out result-{run.public_id}.json" in page
            )
            archive = selfrun.runner_archive()
            assert (
                f'"kirunner[gpu] @ {site_root()}/reproduce/{archive.name}'
                f'#sha256={archive.sha256}"' in html.unescape(page)
            )
            answer = client.get(f"/runs/{run.public_id}/job.json")
            assert answer.status_code == 200
            assert f"job-{run.public_id}.json" in answer["Content-Disposition"]
            job = json.loads(answer.content)
            assert job == selfrun.self_run_job(run)
            # The same file for every reader: the next one is the page cache's copy.
            again = client.get(f"/runs/{run.public_id}/job.json")
            assert again["X-Page-Cache"] == "hit" and again.content == answer.content
            assert again["Content-Disposition"] == answer["Content-Disposition"]
            if provider == "liger":
                release = validate_job(job)["revision"]
                assert f"liger-kernel=={release}" in page


def test_self_run_job_is_the_controlled_job_document_but_its_job_block(every_source):
    job = RerunJob.objects.select_related("run").first()
    queued = controlled.job_document(job)
    self_run = selfrun.self_run_job(job.run)
    assert {k: v for k, v in queued.items() if k != "job"} == {
        k: v for k, v in self_run.items() if k != "job"
    }
    assert queued["job"]["nonce"] and self_run["job"]["nonce"] is None
    assert self_run["job"]["selfRun"] is True and "selfRun" not in queued["job"]


def test_a_signed_self_run_result_is_never_a_controlled_result(every_source, settings):
    """Even signed with a real worker key, a self-run result fails the controlled schema and
    is refused by the controlled-result import."""
    from kirunner.sign import sign_result
    from reruns.services import ResultRejected, result_record

    run = RerunJob.objects.select_related("run").first().run
    job = selfrun.self_run_job(run)
    result = kirunner.run_job(job, force_cpu=True, rep=20)
    key = bytes.fromhex("5f" * 32)
    sign_result(result, "demo-key", key)
    assert "selfRun" in result_problem(result)
    with pytest.raises(ResultRejected, match="selfRun"):
        result_record(envelope=result, via="file", keys={"demo-key": key})


def test_runner_archive_is_the_wheel_of_the_runner_distribution(client):
    """The backend's wheel of kirunner/pyproject.toml: every module and subpackage, the
    `kirunner` command and the `gpu` extra, the same bytes from every build (so every process
    serves the digest any page printed), and a 304 for a client that has it."""
    archive = selfrun.runner_archive()
    assert archive.name == f"kirunner-{kirunner.__version__}-py3-none-any.whl"
    answer = client.get(f"/reproduce/{archive.name}")
    assert answer.status_code == 200 and answer.content == archive.content
    assert hashlib.sha256(answer.content).hexdigest() == archive.sha256
    assert answer["ETag"] == f'"{archive.sha256}"'
    wheel = zipfile.ZipFile(io.BytesIO(answer.content))
    names = set(wheel.namelist())
    assert {"kirunner/runner.py", "kirunner/result_schema.py", "kirunner/families/__init__.py",
            "kirunner/families/softmax.py"} <= names  # fmt: skip
    info = f"kirunner-{kirunner.__version__}.dist-info/"
    assert "kirunner = kirunner.__main__:main" in wheel.read(info + "entry_points.txt").decode()
    assert "Provides-Extra: gpu" in wheel.read(info + "METADATA").decode()
    rebuilt, name = selfrun.build_runner_wheel(selfrun.RUNNER_FOLDER)
    assert (rebuilt, name) == (archive.content, archive.name)
    again = client.get(f"/reproduce/{archive.name}", HTTP_IF_NONE_MATCH=answer["ETag"])
    assert again.status_code == 304


def test_runner_archive_under_another_name_is_404_with_the_served_name(client):
    name = selfrun.runner_archive().name
    for asked in (f"kirunner-{kirunner.__version__}.zip", "kirunner-0.0.1-py3-none-any.whl"):
        answer = client.get(f"/reproduce/{asked}")
        assert answer.status_code == 404
        assert name in answer.content.decode()


def test_a_runner_that_cannot_be_built_says_why(tmp_path):
    broken = tmp_path / "kirunner"
    shutil.copytree(selfrun.RUNNER_FOLDER, broken, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.rmtree(broken / "families")  # listed in pyproject.toml, gone from the folder
    with pytest.raises(selfrun.ArchiveBuildError, match="families"):
        selfrun.build_runner_wheel(broken)

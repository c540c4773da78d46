"""Self-run jobs: the job file a person downloads from a run page to re-measure the run on
their own GPU with the installed runner, the commands that do it, and the runner's wheel those
commands install from the site.

A self-run job is the controlled reruns' job document (controlled.job_document_for) under a
job block that marks it: `selfRun: true`, no nonce from a worker queue. The runner refuses to
sign its result with a worker key, and the controlled-result schema refuses it whatever
signs it (kirunner/result_schema.py), so its result can only ever become a measured
reproduction, never a controlled result.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from django.urls import reverse

import kirunner
from kilib.origin import site_root
from kirunner.runner import support_problem
from reruns.controlled import job_document_for
from runs.models import Run

RUNNER_FOLDER = Path(kirunner.__file__).resolve().parent
# Every archive entry carries this time (SOURCE_DATE_EPOCH, 2026-01-01 UTC), so every process
# that builds the wheel builds the same bytes: the digest one process prints on a page is the
# digest of the file any other process serves.
RUNNER_BUILT_AT = 1767225600


def self_run_job(run: Run) -> dict:
    header = {
        "id": f"self-run-{run.public_id}",
        "nonce": None,
        "selfRun": True,
        "issuedAt": None,
        "gpuClass": None,
    }
    return job_document_for(run, header)


@dataclass(frozen=True)
class Reproduce:
    """What the run page's "Reproduce on your GPU" shows: the job file's link, the runner's
    archive and its digest, and the commands, or why the runner cannot reproduce this run."""

    problem: str | None
    job_url: str = ""
    job_name: str = ""
    archive_url: str = ""
    archive_name: str = ""
    archive_sha256: str = ""
    commands: tuple[str, ...] = ()


def reproduce_for(run: Run) -> Reproduce:
    problem = support_problem(self_run_job(run))
    if problem is not None:
        return Reproduce(problem=problem)
    job_name = f"job-{run.public_id}.json"
    job_url = site_root() + reverse("reruns:job_file", args=[run.public_id])
    archive = runner_archive()
    archive_url = site_root() + reverse("reruns:runner_archive", args=[archive.name])
    # pip checks a direct URL's #sha256= against the file it downloads.
    packages = [f'"kirunner[gpu] @ {archive_url}#sha256={archive.sha256}"']
    if run.implementation.provider_key == "liger":
        release = _liger_release(run)
        packages.append(f'"liger-kernel=={release}"' if release else "liger-kernel")
    return Reproduce(
        problem=None,
        job_url=job_url,
        job_name=job_name,
        archive_url=archive_url,
        archive_name=archive.name,
        archive_sha256=archive.sha256,
        commands=(
            "python3 -m venv kirunner-env && . kirunner-env/bin/activate",
            "pip install " + " ".join(packages),
            f"curl -fsSL -o {job_name} {job_url}",
            f"kirunner run {job_name} --out result-{run.public_id}.json",
        ),
    )


def _liger_release(run: Run) -> str | None:
    """The liger-kernel release the runner will ask for (kirunner.runner.validate_job)."""
    from kirunner.runner import validate_job

    return validate_job(self_run_job(run))["revision"]


@dataclass(frozen=True)
class RunnerArchive:
    name: str  # the wheel's file name, e.g. kirunner-0.1.0-py3-none-any.whl
    content: bytes
    sha256: str  # hex


class ArchiveBuildError(RuntimeError):
    pass


@functools.lru_cache(maxsize=1)
def runner_archive() -> RunnerArchive:
    """The runner's wheel, built once per process by the build backend that
    kirunner/pyproject.toml names, from that file's metadata (packages, dependencies, extras,
    the `kirunner` command): what `pip install ./kirunner` installs, as one file."""
    content, name = build_runner_wheel(RUNNER_FOLDER)
    return RunnerArchive(name=name, content=content, sha256=hashlib.sha256(content).hexdigest())


def build_runner_wheel(folder: Path) -> tuple[bytes, str]:
    """(the wheel's bytes, its file name), built from a copy of `folder`: the backend writes
    its build and egg-info folders beside the sources, and the served folder is the running
    app's own code (or a checkout others work in)."""
    backend = tomllib.loads((folder / "pyproject.toml").read_text())["build-system"]
    with tempfile.TemporaryDirectory(prefix="kirunner-build-") as tmp:
        source, out = Path(tmp) / "kirunner", Path(tmp) / "dist"
        shutil.copytree(
            folder,
            source,
            ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"),
        )
        out.mkdir()
        # A process of its own: a backend changes the working directory, sys.argv and
        # distutils' state, none of which a web worker should carry afterwards.
        done = subprocess.run(
            [sys.executable, "-c", _BUILD, backend["build-backend"], str(out)],
            cwd=source,
            env={**os.environ, "SOURCE_DATE_EPOCH": str(RUNNER_BUILT_AT)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        wheels = sorted(out.glob("*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            raise ArchiveBuildError(
                f"building the runner's wheel failed ({done.returncode}): "
                + (done.stderr or done.stdout)[-2000:]
            )
        return wheels[0].read_bytes(), wheels[0].name


# PEP 517's build_wheel hook of the backend the runner's pyproject.toml names ("module" or
# "module:object").
_BUILD = (
    "import functools, importlib, sys; "
    "module, _, name = sys.argv[1].partition(':'); "
    "backend = functools.reduce(getattr, filter(None, name.split('.')), "
    "importlib.import_module(module)); "
    "backend.build_wheel(sys.argv[2])"
)

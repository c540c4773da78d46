"""Self-run jobs: the job file a person downloads from a run page to re-measure the run on
their own GPU with the installed runner, and the commands that do it.

A self-run job is the controlled reruns' job document (controlled.job_document_for) under a
job block that marks it: `selfRun: true`, no nonce from a worker queue. The runner refuses to
sign its result with a worker key, and the controlled-result schema refuses it whatever
signs it (kirunner/result_schema.py), so its result can only ever become a measured
reproduction, never a controlled result.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

from django.urls import reverse

import kirunner
from kernelindex.origin import site_root
from kirunner.runner import support_problem
from reruns.controlled import job_document_for
from runs.models import Run

RUNNER_FOLDER = Path(kirunner.__file__).resolve().parent
# What the runner's distribution is made of: its modules and its own pyproject.toml.
RUNNER_FILES = ("pyproject.toml", "README.md")


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
    """What the run page's "Reproduce on your GPU" shows: the job file's link and the
    commands, or why the runner cannot reproduce this run."""

    problem: str | None
    job_url: str = ""
    job_name: str = ""
    commands: tuple[str, ...] = ()


def reproduce_for(run: Run) -> Reproduce:
    problem = support_problem(self_run_job(run))
    if problem is not None:
        return Reproduce(problem=problem)
    job_name = f"job-{run.public_id}.json"
    job_url = site_root() + reverse("reruns:job_file", args=[run.public_id])
    archive = site_root() + reverse("reruns:runner_archive", args=[kirunner.__version__])
    packages = [f'"kirunner[gpu] @ {archive}"']
    if run.implementation.provider_key == "liger":
        release = _liger_release(run)
        packages.append(f'"liger-kernel=={release}"' if release else "liger-kernel")
    return Reproduce(
        problem=None,
        job_url=job_url,
        job_name=job_name,
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


def runner_archive() -> bytes:
    """The runner's source distribution as a zip that pip installs (`pip install URL`): the
    repository's kirunner/ folder as it is, its pyproject.toml beside the modules."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        top = f"kirunner-{kirunner.__version__}"
        for path in sorted(RUNNER_FOLDER.glob("*.py")):
            archive.write(path, f"{top}/{path.name}")
        for name in RUNNER_FILES:
            archive.write(RUNNER_FOLDER / name, f"{top}/{name}")
    return buffer.getvalue()

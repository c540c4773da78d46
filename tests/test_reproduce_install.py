"""The runner installs on its own, as a person with a GPU installs it: its own distribution
(kirunner/pyproject.toml) into a fresh virtual environment, with no web app beside it, then
`kirunner run` on a self-run job in the runner's CPU mode.

The virtual environment is built once per module (about a minute: torch's CPU wheel is on
this machine's disk, `pip install torch==2.13.0` as the test extra does it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import kirunner
from kirunner.result_schema import result_problem, self_run_problem

from .runner.jobs import make_job

pytestmark = pytest.mark.install
REPO = Path(__file__).resolve().parent.parent


def _clean_env() -> dict[str, str]:
    # Nothing of the web app's checkout or settings may leak into the installed runner.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELINDEX_", "DJANGO_"))}
    env.pop("PYTHONPATH", None)
    return env


@pytest.fixture(scope="module")
def installed_runner(tmp_path_factory) -> Path:
    """bin/ of a fresh virtual environment holding `pip install ./kirunner` and nothing else
    but its dependencies."""
    root = tmp_path_factory.mktemp("runner-install")
    source = root / "kirunner"
    shutil.copytree(
        REPO / "kirunner",
        source,
        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"),
    )
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "torch==2.13.0", str(source)],
        cwd=root,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    return venv / "bin"


def run_installed(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(bin_dir / "kirunner"), *args],
        cwd=cwd,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_distribution_version_is_the_package_version():
    meta = tomllib.loads((REPO / "kirunner" / "pyproject.toml").read_text())["project"]
    assert meta["version"] == kirunner.__version__
    assert {"torch", "transformers", "jsonschema", "rfc8785"} <= {
        d.split(">")[0].split("=")[0] for d in meta["dependencies"]
    }
    assert any(d.startswith("triton") for d in meta["optional-dependencies"]["gpu"])


def test_distribution_lists_every_subpackage():
    """The folder is mapped onto the package, so setuptools cannot find subpackages itself: a
    new one left out of the list installs a runner that fails on its first job."""
    listed = tomllib.loads((REPO / "kirunner" / "pyproject.toml").read_text())["tool"][
        "setuptools"
    ]["packages"]
    on_disk = {
        ".".join(("kirunner", *init.parent.relative_to(REPO / "kirunner").parts))
        for init in (REPO / "kirunner").rglob("__init__.py")
        if not {"build", "dist"} & set(init.parts)
    }
    assert set(listed) == on_disk


def test_installed_runner_has_no_web_app_and_explains_itself(installed_runner, tmp_path):
    python = installed_runner / "python"
    where = subprocess.run(
        [str(python), "-c", "import kirunner, importlib.util as u; print(kirunner.__file__); "
         "print(u.find_spec('django'), u.find_spec('runs'))"],
        cwd=tmp_path, env=_clean_env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    module_path, missing = where.stdout.splitlines()
    assert "site-packages" in module_path and str(REPO) not in module_path
    assert missing == "None None"  # neither Django nor the web app came with it
    helped = run_installed(installed_runner, "--help", cwd=tmp_path)
    assert helped.returncode == 0
    for words in ("kirunner run JOB.json --out RESULT.json", "Reproduce a run on your own GPU",
                  "liger-kernel needs a CUDA GPU", "never changes the run's evidence level",
                  "exit status"):  # fmt: skip
        assert words in helped.stdout
    run_help = run_installed(installed_runner, "run", "--help", cwd=tmp_path)
    assert run_help.returncode == 0 and "--cpu" in run_help.stdout


def self_run_job(benchmark: str = "rms_norm") -> dict:
    job = make_job(benchmark, pass_="forward", rep=None)
    job["job"] = {"id": "self-run-test", "nonce": None, "selfRun": True}
    return job


def test_installed_runner_runs_a_self_run_job_on_the_cpu(installed_runner, tmp_path):
    (tmp_path / "job.json").write_text(json.dumps(self_run_job()))
    done = run_installed(
        installed_runner, "run", "job.json", "--out", "result.json", "--cpu", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # Progress on stderr, step by step; the summary on stdout.
    for step in ("checking correctness", "measuring the latency of the forward pass"):
        assert step in done.stderr
    assert "correctness     passed" in done.stdout
    assert "figure          median" in done.stdout
    assert "device time     none: CPU run" in done.stdout
    result = json.loads((tmp_path / "result.json").read_text())
    payload = result["payload"]
    assert payload["status"] == "ok" and payload["device"] == "cpu"
    assert payload["job"] == {"id": "self-run-test", "nonce": None, "selfRun": True}
    runner = payload["runner"]
    assert (runner["name"], runner["version"]) == ("kirunner", kirunner.__version__)
    assert re.fullmatch(r"[0-9a-f]{32}", runner["process"])  # which runner process measured
    assert payload["measurement"]["median"] > 0 and payload["measurement"]["samples"]
    assert payload["measurement"]["diagnostics"]["absent"].startswith("CPU run")
    # The result document the controlled reruns write, marked self-run: never controlled.
    assert self_run_problem(result) is None
    assert result_problem(result) is not None


def test_installed_runner_refuses_to_sign_a_self_run(installed_runner, tmp_path):
    (tmp_path / "job.json").write_text(json.dumps(self_run_job()))
    refused = run_installed(
        installed_runner, "run", "job.json", "--out", "result.json", "--sign", cwd=tmp_path
    )
    assert refused.returncode == 3
    assert "never signed with a worker key" in refused.stderr
    assert not (tmp_path / "result.json").exists()


def test_end_to_end_job_file_runner_upload_moderation_page(
    installed_runner, tmp_path, liger_bench, alice, client
):
    """A run's job file taken from its page, run by the installed runner (CPU mode: this
    machine has no GPU), uploaded through the form and through the API, approved in the admin,
    shown on the run page as measured, never as controlled, its evidence unchanged."""
    import re

    from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
    from rest_framework.test import APIClient

    from attestations import services
    from attestations.models import Attestation
    from runs.models import Run
    from tests.factories_community import login_staff, make_staff, verify_email

    run = (
        Run.objects.public()
        .with_related()
        .filter(benchmark__slug="rms_norm", implementation__provider_key="huggingface",
                timed_pass="forward", metric="latency")
        .order_by("median")
        .first()
    )  # fmt: skip
    evidence = run.evidence
    page = client.get(run.get_absolute_url()).content.decode()
    job_url = re.search(r'href="(/runs/[0-9a-f]+/job\.json)"', page).group(1)
    command = f"kirunner run job-{run.public_id}.json --out result-{run.public_id}.json"
    assert command in page
    (tmp_path / f"job-{run.public_id}.json").write_bytes(client.get(job_url).content)

    done = run_installed(installed_runner, *command.split()[1:], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result_bytes = (tmp_path / f"result-{run.public_id}.json").read_bytes()

    verify_email(alice)
    client.force_login(alice)
    from django.core.files.uploadedfile import SimpleUploadedFile

    form = client.post(
        f"/runs/{run.public_id}/attest/",
        {"kind": "reproduction", "body": "CPU check",
         "result_file": SimpleUploadedFile("result.json", result_bytes)},
    )  # fmt: skip
    assert form.status_code == 302, form.content.decode()[-2000:]
    api = APIClient()
    _, token = services.token_create(user=alice, name="e2e")
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    answer = api.post(
        "/api/v1/attestations/",
        {"run": run.public_id, "kind": "reproduction",
         "result_file": SimpleUploadedFile("result.json", result_bytes)},
        format="multipart",
    )  # fmt: skip
    assert answer.status_code == 201, answer.content
    items = list(Attestation.objects.order_by("pk"))
    assert [i.state for i in items] == ["pending", "pending"]
    assert all(i.is_measured and i.device == "cpu" for i in items)
    client.logout()
    assert "measured with kirunner" not in client.get(run.get_absolute_url()).content.decode()

    staff = make_staff()
    login_staff(client, staff)
    change = client.get(f"/admin/attestations/attestation/{items[0].pk}/change/").content.decode()
    assert "Result file: what the runner recorded" in change
    assert "scaledDown" in change and "&quot;passed&quot;: true" in change
    approved = client.post(
        "/admin/attestations/attestation/",
        {"action": "approve", ACTION_CHECKBOX_NAME: [i.pk for i in items], "apply": "1",
         "reason": ""},
    )  # fmt: skip
    assert approved.status_code == 302
    client.logout()

    shown = client.get(run.get_absolute_url()).content.decode()
    label = (
        f"Measured with kirunner {kirunner.__version__} on the CPU by alice, not controlled by "
        "KernelIndex"
    )
    assert shown.count(label) == 4  # the table and the list, for each of the two uploads
    assert "a CPU run with scaled-down shapes: not comparable" in shown
    assert "% vs published" not in shown.split('id="measured"')[1].split("</section>")[0]
    run.refresh_from_db()
    assert run.evidence == evidence

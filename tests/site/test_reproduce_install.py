"""The runner installs on its own, as a person with a GPU installs it: the wheel the site
serves, fetched over HTTP from a running server with the run page's own commands, and
`pip install ./kirunner` from a checkout, each into a fresh virtual environment with no web
app beside it, then `kirunner run` on a self-run job in the runner's CPU mode, and the result
uploaded.

The runner's dependencies are installed once per test process (tests/runner_env.py: about a
minute, torch's CPU wheel is on this machine's disk); each install of the runner itself is
then a few seconds."""

from __future__ import annotations

import hashlib
import html
import io
import json
import re
import subprocess
import tomllib
import urllib.request
import zipfile
from pathlib import Path

import pytest

import kirunner
from kirunner.result_schema import result_problem, self_run_problem
from tests.kirunner.jobs import make_job
from tests.runner_env import clean_env, fresh_venv, pip_install, run_page_commands, shipped_copy

pytestmark = pytest.mark.install
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed_runner(tmp_path_factory) -> Path:
    """bin/ of a fresh virtual environment holding `pip install ./kirunner` (from a clone's
    files) and its dependencies, nothing else."""
    root = tmp_path_factory.mktemp("runner-install")
    # The runner's folder as git tracks it: a module the checkout has but git does not would
    # be missing for everyone who clones.
    source = shipped_copy(root / "clone", "kirunner")
    bin_dir = fresh_venv(root / "venv")
    pip_install(bin_dir, "-q", str(source), cwd=root)
    return bin_dir


def run_installed(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(bin_dir / "kirunner"), *args],
        cwd=cwd,
        env=clean_env(),
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


def test_the_served_wheel_is_the_one_a_clone_builds(tmp_path):
    """The site builds the wheel from the runner's folder as this checkout has it; a clone has
    only what git tracks. A module that is here but not in git would be in the served wheel
    and missing for everyone else: the two wheels must be the same bytes."""
    from reruns import selfrun

    clone = shipped_copy(tmp_path / "clone", "kirunner")
    assert selfrun.build_runner_wheel(clone) == selfrun.build_runner_wheel(selfrun.RUNNER_FOLDER)


def test_installed_runner_has_no_web_app_and_explains_itself(installed_runner, tmp_path):
    python = installed_runner / "python"
    where = subprocess.run(
        [str(python), "-c", "import kirunner, importlib.util as u; print(kirunner.__file__); "
         "print(u.find_spec('django'), u.find_spec('runs'))"],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, check=True,
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
    from tests.factories_attestations import login_staff, make_staff, verify_email

    run = _cpu_run()
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


def _get(url: str, **headers: str) -> bytes:
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310 - the live server
        return answer.read()


def _cpu_run():
    """A run whose job the runner's CPU mode completes: a Hugging Face row (liger's need CUDA)."""
    from runs.models import Run

    return (
        Run.objects.public()
        .with_related()
        .filter(benchmark__slug="rms_norm", implementation__provider_key="huggingface",
                timed_pass="forward", metric="latency")
        .order_by("median")
        .first()
    )  # fmt: skip


@pytest.fixture
def liger_rows(db):
    """The Liger CSV ingested in the test's own transaction, not once for the module
    (`liger_bench`, tests/conftest.py: rows_for_the_module): the live server reads over a
    connection of its own, which sees committed rows only."""
    from runs.sources.pipeline import ingest
    from tests.conftest import LIGER_CSV

    ingest(source_slug="liger-kernel-bench", locations=[str(LIGER_CSV)])


@pytest.fixture
def served(live_server, settings) -> str:
    """The site on a real port; SITE_ROOT, the origin of every absolute link, is its address."""
    settings.SITE_ROOT = live_server.url
    settings.SITE_ROOT_CONFIGURED = True
    return live_server.url


def test_the_run_page_commands_install_the_served_wheel_run_the_job_and_upload(
    served, liger_rows, alice, client, tmp_path
):
    """What a person does from a run page: read the commands, run them in a shell (a fresh
    virtual environment, pip install of the site's wheel by URL with its digest, curl of the
    job file, kirunner run), then upload the result through the API and the form. The only
    change to the commands: the `gpu` extra is left out (triton and NVML are for a CUDA host;
    the wheel's metadata is checked to declare them)."""
    from attestations import services
    from attestations.models import Attestation
    from reruns import selfrun
    from tests.factories_attestations import verify_email

    run = _cpu_run()
    evidence = run.evidence
    page = _get(served + run.get_absolute_url()).decode()
    block = re.search(r'<pre class="commands"><code>(.*?)</code></pre>', page, re.S).group(1)
    commands = html.unescape(block).strip().splitlines()
    assert len(commands) == 4, commands
    wanted = re.fullmatch(r'pip install "kirunner\[gpu\] @ (\S+)#sha256=([0-9a-f]{64})"',
                          commands[1])  # fmt: skip
    assert wanted, commands[1]
    url, digest = wanted.groups()
    name = f"kirunner-{kirunner.__version__}-py3-none-any.whl"
    assert url == f"{served}/reproduce/{name}"
    assert f'<a href="{url}">{name}</a>' in page and digest in page.split("</pre>")[1]

    # The served file is the wheel the page names: its digest, the runner's packages, the extra.
    wheel = _get(url)
    assert hashlib.sha256(wheel).hexdigest() == digest
    files = zipfile.ZipFile(io.BytesIO(wheel)).namelist()
    on_disk = {
        p.relative_to(REPO).as_posix()
        for p in (REPO / "kirunner").rglob("*.py")
        if not {"build", "dist", "__pycache__"} & set(p.parts)
    }
    assert {f for f in files if f.endswith(".py")} == on_disk
    metadata = (
        zipfile.ZipFile(io.BytesIO(wheel))
        .read(f"kirunner-{kirunner.__version__}.dist-info/METADATA")
        .decode()
    )
    assert "Provides-Extra: gpu" in metadata
    for needed in ("triton", "nvidia-ml-py"):
        assert re.search(rf'Requires-Dist: {needed}\S*; extra == "gpu"', metadata), needed

    # The page's commands, in a shell, as written but for the extra.
    done = run_page_commands(commands, tmp_path)
    assert f"Successfully installed kirunner-{kirunner.__version__}" in done.stdout
    assert "kirunner run JOB.json --out RESULT.json" in (tmp_path / "help.txt").read_text()
    env_bin = tmp_path / "kirunner-env" / "bin"
    where = subprocess.run(
        [str(env_bin / "python"), "-c", "import kirunner, importlib.util as u; "
         "print(kirunner.__file__, u.find_spec('django'))"],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    # The runner came from the wheel into the new environment, and no web app with it.
    assert where[0].startswith(str(tmp_path / "kirunner-env")) and "site-packages" in where[0]
    assert where[1] == "None"
    job = json.loads((tmp_path / f"job-{run.public_id}.json").read_text())
    assert job == selfrun.self_run_job(run)
    result_path = tmp_path / f"result-{run.public_id}.json"
    result = json.loads(result_path.read_text())
    assert result["payload"]["status"] == "ok" and result["payload"]["device"] == "cpu"

    # pip holds the download to the digest: a wrong one refuses the install.
    forged = subprocess.run(
        [str(env_bin / "pip"), "install", "--no-deps", "--force-reinstall",
         f"kirunner @ {url}#sha256={'0' * 64}"],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert forged.returncode != 0 and "HASHES" in forged.stderr

    # Upload: the API with a token (docs/reproduce.md's curl, verbatim but for the values)...
    verify_email(alice)
    _, token = services.token_create(user=alice, name="reproduce")
    posted = subprocess.run(
        ["curl", "-sS", "-o", "answer.json", "-w", "%{http_code}",
         "-H", f"Authorization: Bearer {token}", "-F", f"run={run.public_id}",
         "-F", "kind=reproduction", "-F", f"result_file=@{result_path.name}",
         f"{served}/api/v1/attestations/"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert posted.stdout == "201", (tmp_path / "answer.json").read_text()
    # ...and the form, signed in, over HTTP.
    client.force_login(alice)
    session = client.cookies[settings_session_cookie()].value
    _post_form(served, run.public_id, session, result_path)

    items = list(Attestation.objects.order_by("pk"))
    assert [(i.state, i.is_measured, i.device) for i in items] == [("pending", True, "cpu")] * 2
    api_run = json.loads(_get(f"{served}/api/v1/runs/{run.public_id}/"))
    run.refresh_from_db()
    assert run.evidence == evidence and api_run["evidence"] == evidence


def settings_session_cookie() -> str:
    from django.conf import settings

    return settings.SESSION_COOKIE_NAME


def _post_form(served: str, public_id: str, session: str, result_path: Path) -> None:
    """The reproduction form as a browser posts it: its page first (the CSRF cookie and
    token), then the multipart POST with the file."""
    import requests

    browser = requests.Session()
    browser.cookies.set(settings_session_cookie(), session)
    form_url = f"{served}/runs/{public_id}/attest/"
    page = browser.get(form_url, timeout=60)
    assert page.status_code == 200, page.text[-2000:]
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    with result_path.open("rb") as handle:
        answer = browser.post(
            form_url,
            data={"csrfmiddlewaretoken": csrf, "kind": "reproduction", "body": "CPU check"},
            files={"result_file": (result_path.name, handle, "application/json")},
            headers={"Referer": form_url},
            allow_redirects=False,
            timeout=120,
        )
    assert answer.status_code == 302, answer.text[-3000:]

"""A newcomer's walk from a fresh clone, in the order the README gives it: the quick start's
command verbatim (a new virtual environment, the install, `manage.py demo` on SQLite with no
broker), the README's links, then "Reproduce on your GPU" from a run page (the served wheel
installed in a fresh environment, the job file downloaded, `kirunner run`), the upload through
the API, watching the run's cell, the notice email an approval sends and its unsubscribe link.

Everything runs from the files git tracks (tests/runner_env.py: shipped_copy), never from this
checkout, so a file that works here but was never committed, an ignored build output the
checkout happens to hold, or a dependency only the test extra installs, fails here as it
fails for the person who clones. The demo loads every shipped source, so this module is slow
(6 min 7 s on the 2-CPU host with other jobs running, 5 min 46 s of it the install and the
load; the runner's dependencies were already in their folder), and `.ci/run` runs it with the
others."""

from __future__ import annotations

import html
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import requests

import kirunner
from tests.conftest import quick_start_loaded
from tests.runner_env import REPO, clean_env, run_page_commands, shipped_copy

pytestmark = pytest.mark.install

WATCHER_PASSWORD = "a-long-passphrase-45"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:  # noqa: S310 - loopback
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def _quick_start() -> str:
    """The README's first command, under "Quick start"."""
    section = (REPO / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    command = next(line.strip() for line in section.splitlines() if line.startswith("    "))
    assert command.endswith("manage.py demo"), command
    return command


@pytest.fixture(scope="module")
def site(request, tmp_path_factory):
    """(origin, clone folder, server log) of the quick start served from a shipped copy."""
    clone = shipped_copy(tmp_path_factory.mktemp("fresh-clone") / "kernelindex")
    port = _free_port()
    log = clone.parent / "server.log"
    # The quick start's conditions: SQLite, no broker, DEBUG on, SITE_ROOT unset.
    env = clean_env()
    for name in ("DATABASE_URL", "REDIS_URL", "SITE_ROOT", "DEBUG", "CELERY_BROKER_URL"):
        env.pop(name, None)
    # The README's way to serve on another port: `manage.py demo 8080`.
    with log.open("w") as out:
        server = subprocess.Popen(
            ["bash", "-c", f"{_quick_start()} 127.0.0.1:{port}"],
            cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    origin = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 1800
        while _status(origin + "/") != 200:
            assert server.poll() is None, log.read_text()[-4000:]
            assert time.monotonic() < deadline, log.read_text()[-4000:]
            time.sleep(2)
        # The demo as the quick start loaded it, before this module writes (tests/conftest.py).
        quick_start_loaded(request, tmp_path_factory, clone / "kernelindex.sqlite3")
        yield origin, clone, log
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


def _shell(clone: Path, code: str) -> str:
    """`manage.py shell -c` in the clone's environment, on its database."""
    env = clean_env()
    for name in ("DATABASE_URL", "REDIS_URL", "SITE_ROOT", "DEBUG", "CELERY_BROKER_URL"):
        env.pop(name, None)
    done = subprocess.run(
        [str(clone / ".venv" / "bin" / "python"), "manage.py", "shell", "--no-imports", "-c", code],
        cwd=clone, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _signed_in(origin: str, username: str) -> requests.Session:
    browser = requests.Session()
    page = browser.get(origin + "/accounts/login/", timeout=60)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    answer = browser.post(
        origin + "/accounts/login/",
        data={"csrfmiddlewaretoken": csrf, "login": username, "password": WATCHER_PASSWORD},
        headers={"Referer": origin + "/accounts/login/"},
        allow_redirects=False, timeout=60,
    )  # fmt: skip
    assert answer.status_code == 302, answer.text[-2000:]
    return browser


def test_readme_links_answer(site):
    origin, _, _ = site
    section = (REPO / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    links = re.findall(r"http://127\.0\.0\.1:8000(/[^\s)]*)", section)
    assert len(links) >= 3, links
    for path in links:
        assert _status(origin + path.rstrip(".,")) == 200, path


def test_reproduce_upload_watch_and_unsubscribe(site, tmp_path):
    origin, clone, _ = site
    public_id = _shell(
        clone,
        "from runs.models import Run; print(Run.objects.public().filter("
        "benchmark__slug='rms_norm', implementation__provider_key='huggingface', "
        "timed_pass='forward', metric='latency').order_by('median').first().public_id)",
    ).strip()
    api_run = f"{origin}/api/v1/runs/{public_id}/"
    evidence = requests.get(api_run, timeout=60).json()["evidence"]

    # Reproduce: the run page's commands; links follow the address the demo was opened at.
    page = requests.get(f"{origin}/runs/{public_id}/", timeout=60).text
    block = re.search(r'<pre class="commands"><code>(.*?)</code></pre>', page, re.S).group(1)
    commands = html.unescape(block).strip().splitlines()
    assert (
        f"@ {origin}/reproduce/kirunner-{kirunner.__version__}-py3-none-any.whl#sha256="
        in (commands[1])
    )
    done = run_page_commands(commands, tmp_path)
    assert f"Successfully installed kirunner-{kirunner.__version__}" in done.stdout
    assert "kirunner run JOB.json --out RESULT.json" in (tmp_path / "help.txt").read_text()
    result = tmp_path / f"result-{public_id}.json"
    assert json.loads(result.read_text())["payload"]["status"] == "ok"

    # The people: an uploader with an API token, a watcher who signs in with a password, a
    # maintainer (made in the shell: their real sign-in needs an authenticator app).
    token = _shell(
        clone,
        "from django.contrib.auth import get_user_model as g; "
        "from allauth.account.models import EmailAddress as E; "
        "from attestations.services import token_create; "
        "U = g(); alice = U.objects.create_user('alice', 'alice@example.org', 'x' * 20); "
        "bob = U.objects.create_user('bob', 'bob@example.org', "
        f"'{WATCHER_PASSWORD}'); "
        "[E.objects.create(user=u, email=u.email, verified=True, primary=True) "
        "for u in (alice, bob)]; "
        "U.objects.create_user('maintainer', 'm@example.org', 'x' * 20, is_staff=True); "
        "print(token_create(user=alice, name='walk')[1])",
    ).strip()

    # Upload through the API, as docs/reproduce.md's curl does.
    with result.open("rb") as handle:
        answer = requests.post(
            f"{origin}/api/v1/attestations/",
            headers={"Authorization": f"Bearer {token}"},
            data={"run": public_id, "kind": "reproduction"},
            files={"result_file": (result.name, handle, "application/json")},
            timeout=120,
        )
    assert answer.status_code == 201, answer.text[-2000:]
    assert requests.get(api_run, timeout=60).json()["evidence"] == evidence

    # Watch the run's cell, signed in.
    bob = _signed_in(origin, "bob")
    watch_url = f"{origin}/me/watching/new/?cell={public_id}"
    form = bob.get(watch_url, timeout=60)
    assert form.status_code == 200, form.text[-2000:]
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    events = ("publications", "regressions", "improvements", "evidence", "attestations")
    started = bob.post(
        watch_url,
        data={"csrfmiddlewaretoken": csrf, **dict.fromkeys(events, "on")},
        headers={"Referer": watch_url}, allow_redirects=False, timeout=60,
    )  # fmt: skip
    assert started.status_code == 302, started.text[-2000:]
    assert public_id in bob.get(f"{origin}/me/watching/", timeout=60).text

    # A maintainer approves the upload: the notice goes out (the console email without
    # EMAIL_HOST, sent in the approving process without a broker), unsubscribe link included.
    email = _shell(
        clone,
        "from django.contrib.auth import get_user_model as g; "
        "from attestations.models import Attestation; "
        "from attestations.services import attestation_moderate; "
        "print(attestation_moderate(attestations=Attestation.objects.filter(author__username='alice'), "
        "moderator=g().objects.get(username='maintainer'), state='approved'))",
    )
    assert "bob@example.org" in email and "New reproduction by alice" in email, email[-3000:]
    link = re.search(r"https?://[^/\s]+(/watching/unsubscribe/[^\s<>]+)", email)
    assert link, email[-3000:]
    unsubscribe = origin + link.group(1)
    shown = requests.get(unsubscribe, timeout=60)
    assert shown.status_code == 200 and "<form" in shown.text
    stopped = requests.post(unsubscribe, timeout=60)
    assert stopped.status_code == 200, stopped.text[-2000:]
    assert public_id not in bob.get(f"{origin}/me/watching/", timeout=60).text
    # A reproduction never moves the evidence level, approved or not.
    assert requests.get(api_run, timeout=60).json()["evidence"] == evidence

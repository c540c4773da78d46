"""The documented deploy steps, then DEBUG=0 under gunicorn on PostgreSQL and Redis: every page
kind answers (issue 9, defect 13). Also: without collectstatic the server refuses to start with
a message instead of answering 500 on every page, and X-Forwarded-Proto is believed only when a
proxy is configured."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.db import connection

from tests.factories import RunFactory

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.services


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env.update(
        DEBUG="0",
        SECRET_KEY="ci-" + "k" * 50,
        ALLOWED_HOSTS="127.0.0.1",
        STATIC_ROOT=str(tmp_path / "static"),
        SECURE_SSL_REDIRECT="0",  # plain HTTP on loopback; behind TLS this stays on
        PAGE_CACHE_SECONDS="0",
        **extra,
    )
    return env


def _fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=20) as response:  # noqa: S310 - loopback
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_without_collectstatic_gunicorn_refuses_with_a_reason(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", "import kernelindex.wsgi"],
        cwd=REPO, env=_env(tmp_path), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "collectstatic" in result.stderr


def test_forwarded_proto_is_trusted_only_behind_a_configured_proxy(tmp_path):
    code = "from django.conf import settings; print(settings.SECURE_PROXY_SSL_HEADER)"
    for count, expected in (("0", "None"), ("1", "('HTTP_X_FORWARDED_PROTO', 'https')")):
        result = subprocess.run(
            [sys.executable, "-c", f"import django; django.setup(); {code}"],
            cwd=REPO, capture_output=True, text=True, timeout=60,
            env={**_env(tmp_path), "TRUSTED_PROXY_COUNT": count,
                 "DJANGO_SETTINGS_MODULE": "kernelindex.settings"},
        )  # fmt: skip
        assert result.stdout.strip() == expected, result.stderr


@pytest.mark.django_db(transaction=True)
def test_debug_off_under_gunicorn_serves_every_page_kind(services, tmp_path):
    run = RunFactory()
    other = RunFactory(implementation__slug="torch")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    root = f"http://127.0.0.1:{port}"
    db = connection.settings_dict
    env = _env(
        tmp_path,
        SITE_ROOT=root,
        DATABASE_URL=f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
    )
    # The README's deploy steps: collectstatic, then gunicorn.
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=REPO, env=env, check=True, timeout=120,
    )  # fmt: skip
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "kernelindex.wsgi", "-b", f"127.0.0.1:{port}",
         "-w", "1", "--timeout", "60"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if _fetch(f"{root}/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        pages = [
            "/", "/runs/", run.get_absolute_url(), f"/runs/{run.public_id}.json",
            f"/runs/{run.public_id}/cite.bib", f"/runs/{run.public_id}/cite.csl.json",
            f"/runs/{run.public_id}/compare/{other.public_id}/",
            run.benchmark.get_absolute_url(), run.group.get_absolute_url(),
            run.source.get_absolute_url(), run.environment.gpu.get_absolute_url(),
            "/feeds/runs.atom", "/api/v1/", "/api/v1/runs/", f"/api/v1/runs/{run.public_id}/",
            "/api/v1/benchmarks/", "/api/v1/groups/", "/api/v1/sources/",
            "/api/v1/environments/", "/api/v1/schema/", "/api/v1/docs/",
            "/api/v1/runs/export.csv", "/api/v1/attestations/", "/accounts/login/",
            "/accounts/signup/", "/accounts/password/reset/",
        ]  # fmt: skip
        answers = {page: _fetch(root + page) for page in pages}
        bad = {page: status for page, (status, _) in answers.items() if status != 200}
        assert bad == {} or set(bad) <= {"/api/v1/"}, bad
        # Links in citations and the feed come from SITE_ROOT.
        assert f"{root}/runs/".encode() in answers["/feeds/runs.atom"][1]
        assert b"localhost:8000" not in answers["/feeds/runs.atom"][1]
        assert root.encode() in answers[f"/runs/{run.public_id}/cite.bib"][1]
        # The stylesheet the pages link is served under its hashed name.
        html = answers["/"][1].decode()
        css = html.split('href="/static/css/site.', 1)[1].split('"', 1)[0]
        assert _fetch(f"{root}/static/css/site.{css}")[0] == 200
        # Defect 12: PostgreSQL terminates the server's backends (a restart, a failover). The
        # next requests reconnect (CONN_HEALTH_CHECKS) and none fails.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            assert cursor.fetchone()[0] >= 1, "gunicorn held no connection to terminate"
        after = [_fetch(root + page)[0] for page in ("/", run.get_absolute_url(), "/api/v1/runs/")]
        assert after == [200, 200, 200]
    finally:
        server.terminate()
        server.wait(timeout=20)


def _serve(tmp_path: Path, **extra: str):
    """gunicorn as the README starts it, from the repository (so gunicorn.conf.py applies)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = _env(tmp_path, **extra)
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=REPO, env=env, check=True, timeout=120,
    )  # fmt: skip
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "kernelindex.wsgi", "-b", f"127.0.0.1:{port}", "-w", "1"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    root = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if _fetch(f"{root}/healthz")[0] == 200:
                return server, root
        except OSError:
            time.sleep(0.2)
    server.terminate()
    raise AssertionError("gunicorn did not start")


def _secure_to_django(root: str) -> bool:
    """Did Django take a plain-HTTP request carrying X-Forwarded-Proto: https from 127.0.0.1
    as secure? SecurityMiddleware sends HSTS (on with DEBUG=0) only on secure requests."""
    request = urllib.request.Request(f"{root}/healthz", headers={"X-Forwarded-Proto": "https"})
    with urllib.request.urlopen(request, timeout=20) as response:  # noqa: S310 - loopback
        return "Strict-Transport-Security" in response.headers


@pytest.mark.parametrize("count, believed", [("0", False), ("1", True)])
def test_gunicorn_believes_forwarded_proto_only_behind_a_configured_proxy(
    tmp_path, count, believed
):
    server, root = _serve(tmp_path, TRUSTED_PROXY_COUNT=count)
    try:
        assert _secure_to_django(root) is believed
    finally:
        server.terminate()
        server.wait(timeout=20)

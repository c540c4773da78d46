"""`manage.py check --deploy` is clean with production settings."""

from __future__ import annotations

import os
import secrets
import string
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_check_deploy_passes_with_production_settings():
    alphabet = string.ascii_letters + string.digits + "!@#%^&*(-_=+)"
    env = {
        key: value
        for key, value in os.environ.items()
        # The browser tests' DJANGO_ALLOW_ASYNC_UNSAFE belongs to the test process, not to a
        # deployment, and the check rightly refuses it.
        if key
        not in {
            "DEBUG",
            "SECRET_KEY",
            "ALLOWED_HOSTS",
            "SECURE_SSL_REDIRECT",
            "DJANGO_ALLOW_ASYNC_UNSAFE",
        }
    }
    env.update(
        DEBUG="0",
        SECRET_KEY="".join(secrets.choice(alphabet) for _ in range(50)),
        ALLOWED_HOSTS="example.org",
        SITE_ROOT="https://example.org",
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "System check identified no issues (0 silenced)." in output
    assert "WARNING" not in output


def test_check_deploy_catches_an_insecure_setting():
    # The same command fails when a production safeguard is off, so the test above can fail.
    env = {**os.environ, "DEBUG": "0", "SECRET_KEY": "k" * 50, "ALLOWED_HOSTS": "example.org"}
    env["SECURE_HSTS_SECONDS"] = "0"
    env.pop("SITE_ROOT", None)
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "security.W004" in result.stdout + result.stderr
    # Links built from an unset SITE_ROOT would point at localhost.
    assert "kernelindex.W001" in result.stdout + result.stderr

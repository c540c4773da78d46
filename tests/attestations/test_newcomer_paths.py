"""What a newcomer meets on the account side: the email names the site, confirming it signs
the person in, the login page speaks to readers, staff find the admin, and the maintainer
command explains itself without a terminal."""

from __future__ import annotations

import io
import re

import pytest
from django.core import mail
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.factories_attestations import login_staff, make_staff
from tests.pages import text_of

SIGNUP = {
    "email": "erin@example.org",
    "username": "erin",
    "password1": "a-long-passphrase-43",
    "password2": "a-long-passphrase-43",
}


def test_the_verification_email_names_the_site_and_confirming_signs_in(client, db):
    client.post("/accounts/signup/", SIGNUP, HTTP_HOST="127.0.0.1")
    body = mail.outbox[0].body
    assert body.startswith("Hello from KernelIndex!")
    assert "127.0.0.1" not in body  # neither the host name nor a link built from it
    link = re.search(r"https?://[^/\s]+(/accounts/confirm-email/\S+)", body).group(1)
    assert "_auth_user_id" not in client.session
    client.post(link)
    assert client.session.get("_auth_user_id")
    assert "erin" in text_of(client.get("/"))  # the header names the signed-in account


def test_the_login_page_does_not_tell_readers_about_shell_commands(client, db):
    text = text_of(client.get("/accounts/login/"))
    assert "manage.py" not in text
    assert "authenticator" in text  # maintainers still learn that a code follows


def test_staff_with_their_second_factor_have_an_admin_link(client, db, alice):
    admin_link = '<a href="/admin/">Admin</a>'
    client.force_login(alice)
    assert admin_link not in client.get("/runs/").content.decode()
    staff = make_staff("maintainer")
    client.force_login(staff)  # password only: acts as a contributor
    assert admin_link not in client.get("/runs/").content.decode()
    login_staff(client, staff)
    assert admin_link in client.get("/runs/").content.decode()


@pytest.mark.parametrize("password_stdin", [False, True])
def test_maintainer_without_a_terminal_says_how(db, monkeypatch, password_stdin):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with pytest.raises(CommandError, match="--password-stdin"):
        call_command(
            "maintainer", "root", email="root@example.org", password_stdin=password_stdin,
            stdout=io.StringIO(),
        )  # fmt: skip


def test_readme_documents_password_stdin_and_what_the_test_extra_installs():
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    assert "--password-stdin" in readme
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    extra = project["optional-dependencies"]["test"]
    paragraph = next(p for p in readme.split("\n\n") if "The test extra" in p)
    for heavy in ("torch", "transformers"):
        assert any(d.startswith(heavy) for d in extra)
        assert re.search(rf"{heavy}( takes)? \d+ MB", paragraph), heavy

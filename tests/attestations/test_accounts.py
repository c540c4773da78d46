"""Accounts through allauth: sign-up with mandatory verification, login throttling, no
enumeration, logout by POST, the second factor."""

from __future__ import annotations

import io
import re

from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.management import call_command

from tests.factories_attestations import make_staff, totp_code, verify_email

SIGNUP = {
    "email": "dana@example.org",
    "username": "dana",
    "password1": "a-long-passphrase-42",
    "password2": "a-long-passphrase-42",
}


def _link(message) -> str:
    return re.search(r"https?://[^/\s]+(/accounts/confirm-email/[^\s]+)", message.body).group(1)


def test_signup_requires_verification(client, run, db):
    response = client.post("/accounts/signup/", SIGNUP)
    assert response.status_code == 302
    assert response["Location"] == "/accounts/confirm-email/"
    user = get_user_model().objects.get(username="dana")
    assert not EmailAddress.objects.get(user=user).verified
    # Not logged in until the address is verified, so nothing can be posted yet.
    assert client.get(f"/runs/{run.public_id}/attest/").status_code == 302

    assert len(mail.outbox) == 1
    link = _link(mail.outbox[0])
    assert client.get(link).status_code == 200
    assert client.post(link).status_code == 302
    assert EmailAddress.objects.get(user=user).verified

    response = client.post("/accounts/login/", {"login": "dana", "password": SIGNUP["password1"]})
    assert response.status_code == 302
    assert client.get(f"/runs/{run.public_id}/attest/").status_code == 200


def test_unverified_login_is_held_at_verification(client, stranger):
    response = client.post(
        "/accounts/login/", {"login": "charlie", "password": "charlie-password-1"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/accounts/confirm-email/"
    assert "_auth_user_id" not in client.session


def test_login_throttling(client, owner):
    for _ in range(5):
        response = client.post("/accounts/login/", {"login": "alice", "password": "wrong"})
        assert response.status_code == 200
    response = client.post("/accounts/login/", {"login": "alice", "password": "alice-password-1"})
    assert "_auth_user_id" not in client.session
    assert "Too many failed login attempts" in response.content.decode()


def test_failed_logins_throttled_per_ip(client, owner):
    for i in range(10):
        client.post("/accounts/login/", {"login": f"nobody{i}", "password": "wrong"})
    response = client.post("/accounts/login/", {"login": "alice", "password": "alice-password-1"})
    assert "_auth_user_id" not in client.session
    assert "Too many failed login attempts" in response.content.decode()


def test_login_attempts_answer_429_past_the_ip_limit(client, db, settings):
    settings.ACCOUNT_RATE_LIMITS = {**settings.ACCOUNT_RATE_LIMITS, "login": "3/m/ip"}
    codes = [
        client.post("/accounts/login/", {"login": "x", "password": "y"}).status_code
        for _ in range(4)
    ]
    assert codes == [200, 200, 200, 429]


def test_password_reset_does_not_reveal_accounts(client, owner):
    known = client.post("/accounts/password/reset/", {"email": "alice@example.org"})
    unknown = client.post("/accounts/password/reset/", {"email": "nobody@example.org"})
    assert known.status_code == unknown.status_code == 302
    assert known["Location"] == unknown["Location"]
    # The unknown address gets a "no account" note, the known one a reset link: only the
    # mailbox owner learns which.
    assert {tuple(m.to) for m in mail.outbox} == {
        ("alice@example.org",),
        ("nobody@example.org",),
    }


def test_signup_with_taken_email_does_not_reveal_it(client, owner):
    response = client.post("/accounts/signup/", {**SIGNUP, "email": "alice@example.org"})
    assert response.status_code == 302
    assert response["Location"] == "/accounts/confirm-email/"
    assert get_user_model().objects.filter(email="alice@example.org").count() == 1


def test_logout_needs_post(client, owner):
    client.force_login(owner)
    assert client.get("/accounts/logout/").status_code == 200
    assert "_auth_user_id" in client.session
    response = client.post("/accounts/logout/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/"
    assert "_auth_user_id" not in client.session


def test_staff_login_asks_for_totp(client, db):
    make_staff("mod")
    response = client.post(
        "/accounts/login/?next=/admin/", {"login": "mod", "password": "mod-password-1"}
    )
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/2fa/authenticate/")
    assert "_auth_user_id" not in client.session
    wrong = client.post("/accounts/2fa/authenticate/", {"code": "000000"})
    assert wrong.status_code == 200
    assert "_auth_user_id" not in client.session
    right = client.post("/accounts/2fa/authenticate/", {"code": totp_code()})
    assert right.status_code == 302
    assert right["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200


def test_contributor_may_add_totp(client, owner):
    verify_email(owner)
    client.force_login(owner)
    assert client.get("/accounts/2fa/").status_code == 200


def test_maintainer_command_then_one_sign_in_path(client, db, monkeypatch):
    """The first maintainer comes from the shell with an authenticator; signing in is then
    password, code, admin, with no detour through email or enrolment."""
    out = io.StringIO()
    monkeypatch.setattr("builtins.input", lambda: "root-password-1")
    call_command(
        "maintainer", "root", email="root@example.org", superuser=True, password_stdin=True,
        stdout=out,
    )  # fmt: skip
    secret = re.search(r"secret: (\w+)", out.getvalue()).group(1)
    page = client.get("/accounts/login/").content.decode()
    assert "code from their authenticator app" in page
    response = client.post(
        "/accounts/login/?next=/admin/", {"login": "root", "password": "root-password-1"}
    )
    assert response["Location"].startswith("/accounts/2fa/authenticate/")
    response = client.post("/accounts/2fa/authenticate/", {"code": totp_code(secret)})
    assert response["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200


def test_staff_password_alone_gets_no_staff_power(client, run, db):
    """A staff account that never enrolled signs in with its password and acts as a
    contributor: its rerun order waits for approval, the admin and web enrolment refuse."""
    from reruns.models import JobState, RerunJob

    make_staff("lax", totp=False)
    response = client.post("/accounts/login/", {"login": "lax", "password": "lax-password-1"})
    assert response.status_code == 302 and "_auth_user_id" in client.session
    page = client.get(run.get_absolute_url()).content.decode()
    assert "Order rerun" not in page
    client.post(f"/runs/{run.public_id}/reruns/", {"gpu_class": "h100"})
    assert RerunJob.objects.get().state == JobState.AWAITING_APPROVAL
    assert client.get("/admin/").status_code == 403
    assert client.get("/admin/attestations/attestation/").status_code == 403
    assert client.get("/accounts/2fa/totp/activate/").status_code == 403
    # The demotion is per request and never saved.
    assert get_user_model().objects.get(username="lax").is_staff


def test_account_management_pages(client, owner):
    client.force_login(owner)
    for url in ("/accounts/email/", "/accounts/password/change/", "/accounts/2fa/"):
        assert client.get(url).status_code == 200, url


def test_signup_does_the_same_work_for_a_taken_address(client, owner, monkeypatch, settings):
    """Defect 4: the taken address skipped hashing and answered ten times faster. Both paths
    now hash the password exactly once and answer alike, so the answer's timing says nothing
    about whether an address is registered. (The work is counted, not timed: a wall clock
    on a shared machine would make this test flaky without making it stronger.)"""
    from django.contrib.auth import hashers

    # The production hasher (tests/conftest.py hashes with MD5 for speed).
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    hashed = []
    real = hashers.PBKDF2PasswordHasher.encode

    def counting(self, *args, **kwargs):
        hashed.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(hashers.PBKDF2PasswordHasher, "encode", counting)
    answers = {}
    for kind, email in (("taken", owner.email), ("new", "new@example.org")):
        client.cookies.clear()
        before = len(hashed)
        response = client.post("/accounts/signup/", {**SIGNUP, "email": email, "username": kind})
        assert len(hashed) - before == 1, kind
        answers[kind] = (response.status_code, response["Location"])
    assert answers["taken"] == answers["new"] == (302, "/accounts/confirm-email/")

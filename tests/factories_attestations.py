"""Factories and helpers for the attestations app (attestations, reports, accounts)."""

from __future__ import annotations

import time

import factory
from allauth.account.models import EmailAddress
from allauth.mfa.totp.internal.auth import TOTP, format_hotp_value, hotp_value
from django.contrib.auth import get_user_model

from attestations.models import Attestation, Report
from tests.factories import RunFactory

TOTP_SECRET = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"


def verify_email(user, email: str | None = None) -> EmailAddress:
    address, _ = EmailAddress.objects.update_or_create(
        user=user,
        email=email or user.email,
        defaults={"verified": True, "primary": True},
    )
    return address


def make_staff(username: str = "maintainer", *, totp: bool = True):
    user = get_user_model().objects.create_user(
        username, f"{username}@example.org", f"{username}-password-1"
    )
    user.is_staff = True
    user.is_superuser = True
    user.save()
    verify_email(user)
    if totp:
        TOTP.activate(user, TOTP_SECRET)
    return user


def login_staff(client, user) -> None:
    """Sign `user` in as if through password and TOTP: staff powers need a session that passed
    the second factor, which force_login alone does not record."""
    from allauth.account.internal.flows.login import (
        _AUTHENTICATION_METHODS_USER_SESSION_KEY,
        AUTHENTICATION_METHODS_SESSION_KEY,
    )

    client.force_login(user)
    session = client.session
    now = time.time()
    session[AUTHENTICATION_METHODS_SESSION_KEY] = [
        {"method": "password", "at": now, "username": user.username},
        {"method": "mfa", "at": now, "type": "totp"},
    ]
    session[_AUTHENTICATION_METHODS_USER_SESSION_KEY] = str(user.pk)
    session.save()


def totp_code(secret: str = TOTP_SECRET, offset: int = 0) -> str:
    """The code an authenticator app would show now (offset in 30 s steps)."""
    return format_hotp_value(hotp_value(secret, int(time.time()) // 30 + offset))


class AttestationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Attestation

    run = factory.SubFactory(RunFactory)
    author = None
    kind = "reproduction"
    state = "pending"
    median = factory.LazyAttribute(lambda o: o.run.median + o.run.median // 50)
    p20 = factory.LazyAttribute(lambda o: o.median - 100)
    p80 = factory.LazyAttribute(lambda o: o.median + 100)
    unit = "ns"
    # On the run's own GPU, as a reproduction of it usually is (its deviation then shows).
    gpu = factory.LazyAttribute(
        lambda o: o.run.environment.gpu if o.kind == "reproduction" else None
    )
    body = "Measured on my own box."


class ReportFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Report

    run = factory.SubFactory(RunFactory)
    reporter = None
    category = "wrong_data"
    text = "The p80 looks off."

"""Make a maintainer (staff) account with its authenticator, from the shell.

Shell access is the root of trust: a staff account cannot enrol its first authenticator from the
web, so the first maintainer (and any later one without an authenticator) is set up here. The
TOTP secret and recovery codes are printed once, for the person to scan and keep.
"""

from __future__ import annotations

import getpass
import sys

from allauth.account.models import EmailAddress
from allauth.mfa.adapter import get_adapter as get_mfa_adapter
from allauth.mfa.recovery_codes.internal.auth import RecoveryCodes
from allauth.mfa.totp.internal.auth import TOTP, generate_totp_secret
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from attestations import staffmfa

NO_TERMINAL = (
    "No terminal to ask for the new account's password on. Give it on standard input with "
    "--password-stdin, e.g. `printf '%s' \"$PASSWORD\" | manage.py maintainer NAME --email "
    "ADDRESS --password-stdin`."
)


def _read_password(from_stdin: bool) -> str:
    """The new account's password: the first line of standard input with --password-stdin,
    else asked for on the terminal (getpass without one would read, and echo, stdin)."""
    if not from_stdin and not sys.stdin.isatty():
        raise CommandError(NO_TERMINAL)
    try:
        password = input() if from_stdin else getpass.getpass("Password: ")
    except EOFError:
        raise CommandError(
            "Standard input ended before a password: --password-stdin reads the first line."
            if from_stdin
            else NO_TERMINAL
        ) from None
    return password.strip()


class Command(BaseCommand):
    help = "Create or promote a maintainer (staff) account and set up its TOTP authenticator."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--email", help="for a new account (marked verified)")
        parser.add_argument("--superuser", action="store_true", help="all admin permissions")
        parser.add_argument(
            "--password-stdin", action="store_true", help="read a new account's password from stdin"
        )

    def handle(self, *args, username: str, email: str | None, superuser: bool, **options):
        users = get_user_model()
        user = users.objects.filter(username=username).first()
        with transaction.atomic():
            if user is None:
                if not email:
                    raise CommandError("A new account needs --email.")
                password = _read_password(options["password_stdin"])
                user = users(username=username, email=email)
                try:
                    validate_password(password, user)
                except ValidationError as exc:
                    raise CommandError(" ".join(exc.messages)) from None
                user.set_password(password)
                user.save()
            if user.email:
                EmailAddress.objects.update_or_create(
                    user=user, email=user.email, defaults={"verified": True, "primary": True}
                )
            secret = None
            if not staffmfa.has_totp(user):
                secret = generate_totp_secret()
                TOTP.activate(user, secret)
            codes = RecoveryCodes.activate(user).get_unused_codes()
            user.is_staff = True
            user.is_superuser = user.is_superuser or superuser
            user.save(update_fields=["is_staff", "is_superuser"])
        self.stdout.write(
            f"{username} is a maintainer (staff{', superuser' if user.is_superuser else ''})."
        )
        if secret:
            url = get_mfa_adapter().build_totp_url(user, secret)
            self.stdout.write(
                "Add this authenticator now; it is shown once.\n"
                f"  secret: {secret}\n  otpauth URL: {url}\n"
                f"  recovery codes: {' '.join(codes)}"
            )
        else:
            self.stdout.write("The account already had an authenticator; it keeps it.")
        self.stdout.write("Sign in at /accounts/login/ with the password, then the 6-digit code.")

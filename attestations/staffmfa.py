"""Staff powers need a session that passed the second factor.

A password alone never acts as staff: a staff account whose session did not pass TOTP (it has
no authenticator yet, it was signed in some other way, or it calls the API with a bearer token)
is handled for that request as the contributor it also is. The request's user object is
demoted in memory, so every check downstream (the admin's `has_permission`, the rerun and
moderation services, templates) sees a non-staff user; the demotion is never written back.

A staff account without an authenticator cannot enrol one from the web either: that would make
a stolen password enough to become staff. Maintainers get their authenticator from someone with
shell access (`manage.py maintainer`, see docs/security.md).
"""

from __future__ import annotations

from allauth.account.authentication import get_authentication_records
from allauth.mfa.models import Authenticator
from django.contrib.auth import get_user_model
from django.db.models.signals import post_save, pre_save
from django.http import HttpRequest

_DEMOTED = "_kernelindex_staff_demoted"


def has_totp(user) -> bool:
    return Authenticator.objects.filter(user=user, type=Authenticator.Type.TOTP).exists()


def session_passed_mfa(request: HttpRequest, user) -> bool:
    return any(
        record.get("method") == "mfa" for record in get_authentication_records(request, user)
    )


def demote(user) -> None:
    """Staff flags off for this request only; the originals are kept for saves."""
    if getattr(user, _DEMOTED, None) is None:
        setattr(user, _DEMOTED, (user.is_staff, user.is_superuser))
    user.is_staff = False
    user.is_superuser = False
    # Cached permission sets were built before the demotion.
    for cache_name in ("_perm_cache", "_user_perm_cache", "_group_perm_cache"):
        user.__dict__.pop(cache_name, None)


def is_demoted(user) -> bool:
    return getattr(user, _DEMOTED, None) is not None


def acting_staff(request: HttpRequest) -> None:
    """Demote request.user unless its session passed MFA."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or not (user.is_staff or user.is_superuser):
        return
    if not session_passed_mfa(request, user):
        demote(user)


def _restore_before_save(sender, instance, **kwargs) -> None:
    # A demoted user saved during the request (password change, last login) keeps its real
    # flags in the database.
    original = getattr(instance, _DEMOTED, None)
    if original is not None:
        instance.is_staff, instance.is_superuser = original


def _demote_after_save(sender, instance, **kwargs) -> None:
    if getattr(instance, _DEMOTED, None) is not None:
        demote(instance)


def connect_signals() -> None:
    user_model = get_user_model()
    pre_save.connect(_restore_before_save, sender=user_model, dispatch_uid="staffmfa-pre")
    post_save.connect(_demote_after_save, sender=user_model, dispatch_uid="staffmfa-post")

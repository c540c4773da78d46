"""Writes of the community app. Views, the API and the admin all call these.

None of them writes to a run: a run's evidence level moves only through controlled reruns.

Attestation states:
1. A verified, unbanned user creates an item: `pending`.
2. While pending, the author may edit it, or withdraw it (`withdrawn`, final).
3. A maintainer moves it to `approved`, `rejected` or `hidden` (with a reason for the last
   two), and may move it between those later; every move is a ModerationEvent.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from allauth.account.models import EmailAddress
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from attestations import measured, tasks
from attestations.models import (
    ApiToken,
    Attestation,
    Kind,
    ModerationEvent,
    PosterBan,
    Report,
    ReportCategory,
    ReportState,
    State,
)
from attestations.units import MAX_STORED_VALUE
from attestations.watching.receivers import dispatch
from kilib.origin import site_root
from runs.models import Gpu, Run


class CommunityError(Exception):
    """A write that the rules refuse; the message is shown to the user as is."""


class NotAllowed(CommunityError):
    pass


class WrongState(CommunityError):
    pass


MODERATION_STATES = (State.APPROVED, State.REJECTED, State.HIDDEN)
EDITABLE_FIELDS = (
    "median", "p20", "p80", "unit", "gpu", "driver_version", "cuda_version", "torch_version",
    "other_versions", "harness", "commit_url", "body",
)  # fmt: skip


def posting_refusal(user) -> str | None:
    """Why `user` may not post now, or None when they may."""
    if user is None or not user.is_authenticated or not user.is_active:
        return "Log in to post."
    if not EmailAddress.objects.filter(user=user, verified=True).exists():
        return "Verify your email address before posting."
    if PosterBan.objects.active().filter(user=user).exists():
        return "Your account may not post reproductions, notes or reports."
    return None


def _require_poster(user) -> None:
    refusal = posting_refusal(user)
    if refusal:
        raise NotAllowed(refusal)


@dataclass(frozen=True)
class Measurement:
    median: int | None = None
    p20: int | None = None
    p80: int | None = None
    unit: str = ""


def _validate(
    *, run: Run, kind: str, measurement: Measurement, body: str, commit_url: str = ""
) -> None:
    # Pages link the commit URL, so only web links are stored, whatever path the write took.
    if commit_url and not commit_url.lower().startswith(("https://", "http://")):
        raise ValidationError({"commit_url": "Give an http or https link."})
    if kind not in Kind.values:
        raise ValidationError({"kind": "Choose reproduction or note."})
    if len(body) > settings.COMMUNITY_MAX_BODY_CHARS:
        raise ValidationError({"body": f"At most {settings.COMMUNITY_MAX_BODY_CHARS} characters."})
    m = measurement
    if kind == Kind.NOTE:
        if not body.strip():
            raise ValidationError({"body": "A note needs text."})
        if m.median is not None:
            raise ValidationError({"median": "A note carries no measurement."})
        return
    if m.median is None:
        raise ValidationError({"median": "A reproduction needs a measured median."})
    if m.unit != run.unit:
        raise ValidationError({"unit": f"This run is measured in {run.unit}."})
    # The one bound on measured values, for the form and the API alike: what a bigint column
    # holds with room to spare (10**15 ns is eleven days, 10**15 B a petabyte).
    for name in ("median", "p20", "p80"):
        value = getattr(m, name)
        if value is not None and value > MAX_STORED_VALUE:
            raise ValidationError({name: "That value is too large."})
    values = [v for v in (m.p20, m.median, m.p80) if v is not None]
    if any(v <= 0 for v in values):
        raise ValidationError({"median": "Measured values must be positive."})
    if values != sorted(values):
        raise ValidationError({"median": "Expected p20 ≤ median ≤ p80."})


def attestation_create(
    *,
    run: Run,
    author,
    kind: str,
    measurement: Measurement | None = None,
    gpu: Gpu | None = None,
    driver_version: str = "",
    cuda_version: str = "",
    torch_version: str = "",
    other_versions: str = "",
    harness: str = "",
    commit_url: str = "",
    body: str = "",
) -> Attestation:
    _require_poster(author)
    measurement = measurement or Measurement()
    _validate(run=run, kind=kind, measurement=measurement, body=body, commit_url=commit_url)
    is_repro = kind == Kind.REPRODUCTION
    return Attestation.objects.create(
        run=run,
        author=author,
        kind=kind,
        median=measurement.median,
        p20=measurement.p20,
        p80=measurement.p80,
        unit=measurement.unit if is_repro else "",
        gpu=gpu if is_repro else None,
        driver_version=driver_version if is_repro else "",
        cuda_version=cuda_version if is_repro else "",
        torch_version=torch_version if is_repro else "",
        other_versions=other_versions if is_repro else "",
        harness=harness if is_repro else "",
        commit_url=commit_url if is_repro else "",
        body=body,
    )


def reproduction_from_result(*, run: Run, author, document: object, body: str = "") -> Attestation:
    """A measured reproduction: the result file of a self-run job, checked by
    attestations/measured.py, stored whole; figures, GPU and versions come from the file.
    It starts pending like any attestation and, like any, never moves the run's evidence."""
    _require_poster(author)
    result = measured.read(run, document)
    _validate(
        run=run,
        kind=Kind.REPRODUCTION,
        measurement=Measurement(result.median, result.p20, result.p80, result.unit),
        body=body,
    )
    return Attestation.objects.create(
        run=run,
        author=author,
        kind=Kind.REPRODUCTION,
        median=result.median,
        p20=result.p20,
        p80=result.p80,
        unit=result.unit,
        gpu=result.gpu,
        driver_version=result.driver_version,
        cuda_version=result.cuda_version,
        torch_version=result.torch_version,
        other_versions=result.other_versions,
        harness=f"kirunner {result.runner_version}".strip(),
        body=body,
        result_document=result.document,
        result_digest=result.digest,
        runner_version=result.runner_version,
        device=result.device,
        device_ns=result.device_ns,
        classification=result.classification,
    )


def attestation_update(
    *,
    attestation: Attestation,
    editor,
    measurement: Measurement | None = None,
    **fields,
) -> Attestation:
    """The author edits their own pending item; kind and run stay as they were."""
    if attestation.author_id != getattr(editor, "pk", None):
        raise NotAllowed("Only the author may edit this item.")
    _require_poster(editor)
    if attestation.is_measured:
        raise WrongState(
            "A measured reproduction is its result file: withdraw it and upload another."
        )
    if not attestation.is_editable:
        raise WrongState("Only pending items can be edited.")
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise ValidationError(f"Not editable: {', '.join(sorted(unknown))}")
    if measurement is not None:
        fields.update(
            median=measurement.median, p20=measurement.p20, p80=measurement.p80,
            unit=measurement.unit,
        )  # fmt: skip
    for name, value in fields.items():
        setattr(attestation, name, value)
    _validate(
        run=attestation.run,
        kind=attestation.kind,
        measurement=Measurement(
            attestation.median, attestation.p20, attestation.p80, attestation.unit
        ),
        body=attestation.body,
        commit_url=attestation.commit_url,
    )
    with transaction.atomic():
        # Re-check the state under a row lock: a moderator may have acted since the page loaded.
        locked = Attestation.objects.select_for_update().get(pk=attestation.pk)
        if locked.state != State.PENDING:
            raise WrongState("This item was moderated meanwhile and can no longer be edited.")
        attestation.save(update_fields=[*fields, "updated_at"])
    return attestation


def attestation_withdraw(*, attestation: Attestation, user) -> Attestation:
    if attestation.author_id != getattr(user, "pk", None):
        raise NotAllowed("Only the author may withdraw this item.")
    with transaction.atomic():
        updated = Attestation.objects.filter(pk=attestation.pk, state=State.PENDING).update(
            state=State.WITHDRAWN, updated_at=timezone.now()
        )
        if not updated:
            raise WrongState("Only pending items can be withdrawn.")
        ModerationEvent.objects.create(
            actor=user,
            action="withdraw",
            attestation=attestation,
            from_state=State.PENDING,
            to_state=State.WITHDRAWN,
        )
    attestation.refresh_from_db()
    return attestation


def attestation_moderate(
    *, attestations: Iterable[Attestation], moderator, state: str, reason: str = ""
) -> int:
    """Move items to approved, rejected or hidden; returns how many changed."""
    if not (moderator.is_active and moderator.is_staff):
        raise NotAllowed("Only maintainers moderate.")
    if state not in MODERATION_STATES:
        raise ValidationError(f"Moderation moves items to {', '.join(MODERATION_STATES)}.")
    reason = reason.strip()
    if state != State.APPROVED and not reason:
        raise ValidationError("Give a reason for rejecting or hiding.")
    if len(reason) > 500:
        raise ValidationError("A reason is at most 500 characters.")
    now = timezone.now()
    changed = 0
    approved: list[int] = []
    pks = [a.pk for a in attestations]
    with transaction.atomic():
        for item in Attestation.objects.select_for_update().filter(pk__in=pks).order_by("pk"):
            # Withdrawn is the author's final word; an unchanged state is not an event.
            if item.state in (State.WITHDRAWN, state):
                continue
            ModerationEvent.objects.create(
                actor=moderator,
                created_at=now,
                action=f"moderate:{state}",
                attestation=item,
                from_state=item.state,
                to_state=state,
                reason=reason,
            )
            item.state = state
            item.moderation_reason = reason
            item.moderated_by = moderator
            item.moderated_at = now
            item.save(
                update_fields=[
                    "state", "moderation_reason", "moderated_by", "moderated_at", "updated_at",
                ]
            )  # fmt: skip
            changed += 1
            if state == State.APPROVED:
                approved.append(item.pk)
    if approved:
        # Watchers hear of new approved items once the approval is committed.
        transaction.on_commit(lambda: _announce_approved(approved))
    return changed


def _announce_approved(pks: list[int]) -> None:
    dispatch(tasks.notices_attestations, attestation_ids=pks)


def report_create(*, run: Run, reporter, category: str, text: str) -> Report:
    _require_poster(reporter)
    if category not in ReportCategory.values:
        raise ValidationError({"category": "Choose a category."})
    text = text.strip()
    if not text:
        raise ValidationError({"text": "Say what is wrong."})
    if len(text) > settings.COMMUNITY_MAX_BODY_CHARS:
        raise ValidationError({"text": f"At most {settings.COMMUNITY_MAX_BODY_CHARS} characters."})
    report = Report.objects.create(run=run, reporter=reporter, category=category, text=text)
    transaction.on_commit(lambda: _notify_maintainers(report.pk))
    return report


def _notify_maintainers(report_pk: int) -> None:
    report = Report.objects.select_related("run", "reporter").get(pk=report_pk)
    recipients = list(
        get_user_model()
        .objects.filter(is_staff=True, is_active=True)
        .exclude(email="")
        .values_list("email", flat=True)
    )
    if not recipients:
        return
    admin_url = f"{site_root()}/admin/attestations/report/{report.pk}/change/"
    send_mail(
        subject=f"[KernelIndex] New report on run {report.run.public_id}: "
        f"{report.get_category_display()}",
        message=(
            f"{report.reporter.get_username()} reported a problem with run "
            f"{report.run.public_id} ({site_root()}{report.run.get_absolute_url()}).\n\n"
            f"Category: {report.get_category_display()}\n\n{report.text}\n\n"
            f"Answer it in the admin: {admin_url}\n"
        ),
        from_email=None,
        recipient_list=recipients,
    )


def report_answer_problem(*, state: str, answer: str) -> str | None:
    """What is wrong with moving a report to `state` with `answer`, or None."""
    if state not in ReportState.values:
        return "Unknown report state."
    if state in (ReportState.RESOLVED, ReportState.DISMISSED) and not answer.strip():
        return "Give the reporter an answer when resolving or dismissing."
    if len(answer) > settings.COMMUNITY_MAX_BODY_CHARS:
        return f"At most {settings.COMMUNITY_MAX_BODY_CHARS} characters."
    return None


def report_answer(*, report: Report, maintainer, state: str, answer: str = "") -> Report:
    if not (maintainer.is_active and maintainer.is_staff):
        raise NotAllowed("Only maintainers answer reports.")
    answer = answer.strip()
    problem = report_answer_problem(state=state, answer=answer)
    if problem:
        raise ValidationError(problem)
    with transaction.atomic():
        locked = Report.objects.select_for_update().get(pk=report.pk)
        if locked.state == state and locked.answer == answer:
            return locked
        ModerationEvent.objects.create(
            actor=maintainer,
            action="answer" if answer != locked.answer else f"report:{state}",
            report=locked,
            from_state=locked.state,
            to_state=state,
            reason=answer[:500],
        )
        locked.state = state
        if answer != locked.answer:
            locked.answer = answer
            locked.answered_by = maintainer
            locked.answered_at = timezone.now()
        locked.save()
    return locked


def poster_ban(*, user, moderator, reason: str) -> PosterBan:
    if not (moderator.is_active and moderator.is_staff):
        raise NotAllowed("Only maintainers ban.")
    if not reason.strip():
        raise ValidationError("Give a reason for the ban.")
    with transaction.atomic():
        existing = PosterBan.objects.active().select_for_update().filter(user=user).first()
        if existing:
            return existing
        ban = PosterBan.objects.create(user=user, reason=reason.strip()[:500], created_by=moderator)
        ModerationEvent.objects.create(
            actor=moderator, action="ban", subject=user, reason=ban.reason
        )
    return ban


def poster_unban(*, user, moderator, reason: str = "") -> int:
    if not (moderator.is_active and moderator.is_staff):
        raise NotAllowed("Only maintainers lift bans.")
    with transaction.atomic():
        lifted = PosterBan.objects.active().filter(user=user).update(lifted_at=timezone.now())
        if lifted:
            ModerationEvent.objects.create(
                actor=moderator, action="unban", subject=user, reason=reason.strip()[:500]
            )
    return lifted


TOKEN_PREFIX = "ki_"


def _token_digest(raw: str) -> str:
    # Tokens are 256 random bits, so a plain SHA-256 is enough: there is nothing to brute-force.
    return hashlib.sha256(raw.encode()).hexdigest()


def token_create(*, user, name: str) -> tuple[ApiToken, str]:
    """Returns the token row and the raw token, which is never stored and shown only once."""
    name = name.strip()
    if not name or len(name) > 100:
        raise ValidationError({"name": "Name the token (at most 100 characters)."})
    if ApiToken.objects.active().filter(user=user).count() >= 20:
        raise NotAllowed("At most 20 active tokens; revoke one first.")
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, prefix=raw[:10], digest=_token_digest(raw)
    )
    return token, raw


def token_revoke(*, token: ApiToken, user) -> ApiToken:
    """The owner revokes their token; maintainers may revoke any (a leaked token)."""
    is_owner = token.user_id == getattr(user, "pk", None)
    if not (is_owner or (user.is_active and user.is_staff)):
        raise NotAllowed("Only the token's owner may revoke it.")
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def token_authenticate(raw: str):
    """The active user a raw token belongs to, or None."""
    if not raw.startswith(TOKEN_PREFIX) or len(raw) > 100:
        return None
    token = (
        ApiToken.objects.active()
        .select_related("user")
        .filter(digest=_token_digest(raw), user__is_active=True)
        .first()
    )
    if token is None:
        return None
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return token.user


def on_change_reviewed(
    sender,
    *,
    review_id: int,
    actor_id: int,
    from_state: str,
    to_state: str,
    reason: str,
    **kwargs,
) -> None:
    """A maintainer's acknowledgement or dismissal of a detected change (runs.signals.
    change_reviewed, sent inside the review's transaction) in the moderation trail."""
    ModerationEvent.objects.create(
        actor_id=actor_id, action=f"change {to_state}", change_review_id=review_id,
        from_state=from_state, to_state=to_state, reason=reason,
    )  # fmt: skip

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from attestations import measured, services
from attestations.forms import AttestationForm, ReportForm, TokenForm
from attestations.models import ApiToken, Attestation
from attestations.ratelimit import ratelimited
from runs.models import Run


def _own_attestation(request: HttpRequest, pk: int) -> Attestation:
    # Someone else's item answers 404, not 403: ids of pending items are nobody else's business.
    return get_object_or_404(Attestation.objects.with_related(), pk=pk, author=request.user)


def _refused(request: HttpRequest, message: str, status: int = 403) -> HttpResponse:
    return render(request, "attestations/refused.html", {"message": message}, status=status)


def _apply_errors(form, exc: ValidationError) -> None:
    if hasattr(exc, "error_dict"):
        for field, errors in exc.error_dict.items():
            form.add_error(field if field in form.fields else None, errors)
    else:
        form.add_error(None, exc)


def _create(request: HttpRequest, run: Run, form: AttestationForm):
    """A measured reproduction from the uploaded result file, or the typed-in item."""
    upload = form.cleaned_data.get("result_file")
    if upload:
        return services.reproduction_from_result(
            run=run,
            author=request.user,
            document=measured.from_upload(upload),
            body=form.cleaned_data["body"],
        )
    return services.attestation_create(
        run=run,
        author=request.user,
        kind=form.cleaned_data["kind"],
        measurement=form.measurement(),
        **form.details(),
    )


@login_required
@ratelimited("attestation")
def attest(request: HttpRequest, public_id: str) -> HttpResponse:
    run = Run.objects.with_related().current_or_404(public_id)
    refusal = services.posting_refusal(request.user)
    if refusal:
        return _refused(request, refusal)
    form = AttestationForm(request.POST or None, request.FILES or None, run=run)
    if request.method == "POST" and form.is_valid():
        try:
            item = _create(request, run, form)
        except ValidationError as exc:
            _apply_errors(form, exc)
        except services.CommunityError as exc:
            return _refused(request, str(exc))
        else:
            messages.success(
                request, f"Thank you. Your {item.get_kind_display().lower()} awaits moderation."
            )
            return redirect(f"{run.get_absolute_url()}#replications")
    return render(request, "attestations/attest.html", {"run": run, "form": form})


def attestation_detail(request: HttpRequest, pk: int) -> HttpResponse:
    item = get_object_or_404(Attestation.objects.readable_by(request.user).with_related(), pk=pk)
    return render(request, "attestations/detail.html", {"item": item, "run": item.run})


@login_required
@ratelimited("attestation")
def attestation_edit(request: HttpRequest, pk: int) -> HttpResponse:
    item = _own_attestation(request, pk)
    if item.is_measured:
        return _refused(request, "A measured reproduction is its result file: withdraw it "
                        "and upload another.", status=409)  # fmt: skip
    if not item.is_editable:
        return _refused(request, "Only pending items can be edited.", status=409)
    form = AttestationForm(request.POST or None, run=item.run, instance=item)
    if request.method == "POST" and form.is_valid():
        try:
            services.attestation_update(
                attestation=item,
                editor=request.user,
                measurement=form.measurement(),
                **form.details(),
            )
        except ValidationError as exc:
            _apply_errors(form, exc)
        except services.WrongState as exc:
            return _refused(request, str(exc), status=409)
        except services.CommunityError as exc:
            return _refused(request, str(exc))
        else:
            messages.success(request, "Saved. The item still awaits moderation.")
            return redirect(item)
    return render(request, "attestations/edit.html", {"item": item, "run": item.run, "form": form})


@login_required
@require_POST
@ratelimited("attestation")
def attestation_withdraw(request: HttpRequest, pk: int) -> HttpResponse:
    item = _own_attestation(request, pk)
    try:
        services.attestation_withdraw(attestation=item, user=request.user)
    except services.WrongState as exc:
        return _refused(request, str(exc), status=409)
    messages.success(request, "Withdrawn.")
    return redirect(item.run)


@login_required
@ratelimited("report")
def report(request: HttpRequest, public_id: str) -> HttpResponse:
    run = Run.objects.with_related().current_or_404(public_id)
    refusal = services.posting_refusal(request.user)
    if refusal:
        return _refused(request, refusal)
    form = ReportForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            services.report_create(run=run, reporter=request.user, **form.cleaned_data)
        except ValidationError as exc:
            _apply_errors(form, exc)
        except services.CommunityError as exc:
            return _refused(request, str(exc))
        else:
            messages.success(request, "Thank you. The maintainers have your report.")
            return redirect("attestations:my_reports")
    return render(request, "attestations/report.html", {"run": run, "form": form})


@login_required
def my_reports(request: HttpRequest) -> HttpResponse:
    reports = request.user.reports.select_related("run__benchmark", "run__implementation")
    return render(request, "attestations/my_reports.html", {"reports": reports})


def user_profile(request: HttpRequest, username: str) -> HttpResponse:
    profile = get_object_or_404(get_user_model(), username=username, is_active=True)
    items = Attestation.objects.approved().by(profile).with_related()
    # The user's own page also lists what the public does not see, with moderators' reasons.
    own_unpublished = (
        Attestation.objects.by(profile).unpublished().with_related()
        if request.user == profile
        else Attestation.objects.none()
    )
    return render(
        request,
        "attestations/profile.html",
        {"profile": profile, "items": items, "own_unpublished": own_unpublished},
    )


@never_cache
@login_required
@ratelimited("token")
def tokens(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST or None)
    created = None
    if request.method == "POST" and form.is_valid():
        try:
            token, raw = services.token_create(user=request.user, name=form.cleaned_data["name"])
        except ValidationError as exc:
            _apply_errors(form, exc)
        except services.CommunityError as exc:
            form.add_error(None, str(exc))
        else:
            # Rendered, not redirected: the raw token exists only in this one response.
            created = {"token": token, "raw": raw}
            form = TokenForm()
    items = ApiToken.objects.of(request.user)
    return render(
        request, "attestations/tokens.html", {"form": form, "tokens": items, "created": created}
    )


@login_required
@require_POST
@ratelimited("token")
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    services.token_revoke(token=token, user=request.user)
    messages.success(request, f"Token “{token.name}” revoked.")
    return redirect("attestations:tokens")

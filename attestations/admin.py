"""Moderation in the Django admin.

Items are changed only through actions that call the services (so every change lands in the
audit trail); their change pages are read-only. Reports are answered on their change page,
which also goes through the service.
"""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import ValidationError
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from attestations import services
from attestations.forms import BanForm, ModerationForm
from attestations.models import (
    ApiToken,
    Attestation,
    ModerationEvent,
    PosterBan,
    Report,
    State,
)
from attestations.templatetags.attestations import comparison, measure, provenance


def _run_link(run) -> str:
    return format_html('<a href="{}">{}</a>', run.get_absolute_url(), run.public_id)


class ModerationEventInline(admin.TabularInline):
    model = ModerationEvent
    fk_name = "attestation"
    extra = 0
    can_delete = False
    fields = ["created_at", "actor", "action", "from_state", "to_state", "reason"]
    readonly_fields = fields
    verbose_name = "audit event"
    verbose_name_plural = "Audit trail"

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class ReportEventInline(ModerationEventInline):
    fk_name = "report"


def _moderation_step(modeladmin, request, queryset, *, state: str, verb: str):
    """Bulk approve/reject/hide with an intermediate page asking for the reason."""
    if "apply" in request.POST:
        form = ModerationForm(request.POST)
        if form.is_valid():
            try:
                changed = services.attestation_moderate(
                    attestations=queryset,
                    moderator=request.user,
                    state=state,
                    reason=form.cleaned_data["reason"],
                )
            except (ValidationError, services.CommunityError) as exc:
                form.add_error("reason", exc.messages if hasattr(exc, "messages") else str(exc))
            else:
                skipped = queryset.count() - changed
                note = (
                    f" ({skipped} already {state} or withdrawn, left as they were)"
                    if skipped
                    else ""
                )
                done = {"Approve": "Approved", "Reject": "Rejected", "Hide": "Hid"}[verb]
                modeladmin.message_user(
                    request,
                    f"{done} {changed} item{'' if changed == 1 else 's'}{note}.",
                    messages.SUCCESS,
                )
                return None
    else:
        form = ModerationForm()
    optional = state == State.APPROVED
    if optional:
        form.fields["reason"].label = "Note to the authors (optional)"
        form.fields["reason"].help_text = "Shown to the author with the approved item."
    else:
        form.fields["reason"].help_text = "Required; shown to the author with the item."
    return TemplateResponse(
        request,
        "admin/attestations/moderate.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": f"{verb}: add a note (optional)" if optional else f"{verb}: give a reason",
            "verb": verb,
            "state": state,
            "items": queryset.select_related("author", "run"),
            "form": form,
            "action": request.POST.get("action"),
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
            "opts": modeladmin.model._meta,
        },
    )


def _ban_step(modeladmin, request, queryset, users: set):
    """Stop `users` from posting, after an intermediate page that asks for the reason."""
    changelist = reverse(
        f"admin:{modeladmin.model._meta.app_label}_{modeladmin.model._meta.model_name}_changelist"
    )
    if "apply" in request.POST:
        form = BanForm(request.POST)
        if form.is_valid():
            for user in users:
                services.poster_ban(
                    user=user, moderator=request.user, reason=form.cleaned_data["reason"]
                )
            modeladmin.message_user(
                request, f"{len(users)} user(s) may no longer post.", messages.SUCCESS
            )
            return None
    else:
        form = BanForm()
    return TemplateResponse(
        request,
        "admin/attestations/ban.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": "Stop these users from posting",
            "authors": sorted(users, key=lambda u: u.username),
            "items": queryset,
            "form": form,
            "action": request.POST.get("action"),
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
            "opts": modeladmin.model._meta,
            "changelist": changelist,
        },
    )


@admin.register(Attestation)
class AttestationAdmin(admin.ModelAdmin):
    list_display = [
        "id", "state", "kind", "run_link", "author", "measured", "vs_published", "gpu",
        "how_measured", "created_at",
    ]  # fmt: skip
    list_display_links = ["id"]
    list_filter = ["state", "kind", "gpu", "created_at"]
    search_fields = ["run__public_id", "author__username", "author__email", "body", "harness"]
    date_hierarchy = "created_at"
    list_select_related = ["run__environment__gpu", "author", "gpu"]
    actions = ["approve", "reject", "hide", "ban_authors"]
    inlines = [ModerationEventInline]
    readonly_fields = [
        "run_link", "author", "kind", "state", "measured", "vs_published", "median", "p20",
        "p80", "unit", "gpu", "driver_version", "cuda_version", "torch_version",
        "other_versions", "harness", "commit_url", "body", "how_measured", "device",
        "device_ns", "classification", "result_digest", "result_diagnostics", "created_at",
        "updated_at", "moderation_reason", "moderated_by", "moderated_at",
    ]  # fmt: skip
    fields = readonly_fields

    @admin.display(description="run")
    def run_link(self, obj: Attestation) -> str:
        return _run_link(obj.run)

    @admin.display(description="measured median")
    def measured(self, obj: Attestation) -> str:
        return measure(obj.median, obj.unit) if obj.median is not None else "—"

    @admin.display(description="vs published")
    def vs_published(self, obj: Attestation) -> str:
        return comparison(obj) if obj.kind == "reproduction" else "—"

    @admin.display(description="how measured")
    def how_measured(self, obj: Attestation) -> str:
        return provenance(obj) if obj.kind == "reproduction" else "—"

    @admin.display(description="result file: what the runner recorded")
    def result_diagnostics(self, obj: Attestation) -> str:
        """What a moderator weighs: the file's correctness checks, diagnostics (device and
        host time, flush, clocks, throttling), environment and implementation, as uploaded."""
        if obj.result_document is None:
            return "no result file: typed in"
        payload = obj.result_document.get("payload") or {}
        shown = {
            "status": payload.get("status"),
            "device": payload.get("device"),
            "correctness": payload.get("correctness"),
            "diagnostics": (payload.get("measurement") or {}).get("diagnostics"),
            "workload": payload.get("workload"),
            "environment": payload.get("environment"),
            "implementation": payload.get("implementation"),
            "runner": payload.get("runner"),
            "startedAt": payload.get("startedAt"),
            "finishedAt": payload.get("finishedAt"),
        }
        return format_html(
            '<pre class="result-diagnostics">{}</pre>', json.dumps(shown, indent=2)[:60_000]
        )

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.action(description="Approve selected items", permissions=["change"])
    def approve(self, request, queryset):
        return _moderation_step(self, request, queryset, state=State.APPROVED, verb="Approve")

    @admin.action(description="Reject selected items (with a reason)", permissions=["change"])
    def reject(self, request, queryset):
        return _moderation_step(self, request, queryset, state=State.REJECTED, verb="Reject")

    @admin.action(description="Hide selected items (with a reason)", permissions=["change"])
    def hide(self, request, queryset):
        return _moderation_step(self, request, queryset, state=State.HIDDEN, verb="Hide")

    @admin.action(
        description="Stop the authors of selected items from posting", permissions=["change"]
    )
    def ban_authors(self, request, queryset):
        return _ban_step(self, request, queryset, {item.author for item in queryset})


class ReportAdminForm(forms.ModelForm):
    class Meta:
        model = Report
        fields = ["state", "answer"]

    def clean(self):
        data = super().clean()
        # The service refuses the same; checking here keeps the maintainer on the form with
        # the message instead of a "changed successfully" that did not happen.
        problem = services.report_answer_problem(
            state=data.get("state", ""), answer=data.get("answer", "")
        )
        if problem:
            self.add_error("answer", problem)
        return data


@admin.register(Report)
class ReportAdmin(admin.ModelAdmin):
    form = ReportAdminForm
    list_display = ["id", "state", "category", "run_link", "reporter", "created_at", "answered_at"]
    list_filter = ["state", "category", "created_at"]
    search_fields = ["run__public_id", "reporter__username", "text", "answer"]
    list_select_related = ["run", "reporter"]
    inlines = [ReportEventInline]
    fields = [
        "run_link", "reporter", "category", "text", "created_at", "state", "answer",
        "answered_by", "answered_at",
    ]  # fmt: skip
    readonly_fields = [
        "run_link", "reporter", "category", "text", "created_at", "answered_by", "answered_at",
    ]  # fmt: skip
    actions = ["mark_triaged", "ban_reporters"]

    @admin.display(description="run")
    def run_link(self, obj: Report) -> str:
        return _run_link(obj.run)

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def save_model(self, request, obj: Report, form, change) -> None:
        # State and answer go through the service, which writes the audit trail; the
        # model instance the admin built is not saved as is.
        try:
            services.report_answer(
                report=obj,
                maintainer=request.user,
                state=form.cleaned_data["state"],
                answer=form.cleaned_data["answer"],
            )
        except (ValidationError, services.CommunityError) as exc:
            self.message_user(request, " ".join(_messages_of(exc)), messages.ERROR)

    @admin.action(
        description="Stop the reporters of selected reports from posting", permissions=["change"]
    )
    def ban_reporters(self, request, queryset):
        return _ban_step(self, request, queryset, {report.reporter for report in queryset})

    @admin.action(description="Mark selected reports triaged", permissions=["change"])
    def mark_triaged(self, request, queryset):
        for report in queryset.filter(state="open"):
            services.report_answer(
                report=report, maintainer=request.user, state="triaged", answer=report.answer
            )
        self.message_user(request, "Marked triaged.", messages.SUCCESS)


def _messages_of(exc: Exception) -> list[str]:
    return getattr(exc, "messages", None) or [str(exc)]


@admin.register(ModerationEvent)
class ModerationEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "actor", "action", "target", "from_state", "to_state", "reason"]
    list_filter = ["action", "created_at"]
    search_fields = ["actor__username", "subject__username", "reason"]
    list_select_related = ["actor", "attestation__run", "report__run", "subject"]
    date_hierarchy = "created_at"

    @admin.display(description="on")
    def target(self, obj: ModerationEvent) -> str:
        if obj.attestation_id:
            url = reverse("admin:attestations_attestation_change", args=[obj.attestation_id])
            return format_html('<a href="{}">attestation #{}</a>', url, obj.attestation_id)
        if obj.report_id:
            url = reverse("admin:attestations_report_change", args=[obj.report_id])
            return format_html('<a href="{}">report #{}</a>', url, obj.report_id)
        if obj.change_review_id:
            url = reverse("admin:runs_changereview_change", args=[obj.change_review_id])
            return format_html('<a href="{}">change review #{}</a>', url, obj.change_review_id)
        return f"user {obj.subject}" if obj.subject_id else "—"

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(PosterBan)
class PosterBanAdmin(admin.ModelAdmin):
    list_display = ["user", "reason", "created_by", "created_at", "lifted_at"]
    list_filter = ["lifted_at"]
    search_fields = ["user__username", "reason"]
    list_select_related = ["user", "created_by"]
    readonly_fields = ["user", "reason", "created_by", "created_at", "lifted_at"]
    actions = ["lift"]

    def has_add_permission(self, request) -> bool:
        # Bans are made with the "Stop the authors…" action on attestations: it asks for a reason
        # and records the event.
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.action(description="Lift selected bans", permissions=["change"])
    def lift(self, request, queryset):
        for ban in queryset.filter(lifted_at=None).select_related("user"):
            services.poster_unban(user=ban.user, moderator=request.user, reason="lifted in admin")
        self.message_user(request, "Lifted.", messages.SUCCESS)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["user__username", "name", "prefix"]
    list_select_related = ["user"]
    readonly_fields = ["user", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    exclude = ["digest"]
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Revoke selected tokens", permissions=["change"])
    def revoke(self, request, queryset):
        for token in queryset.filter(revoked_at=None).select_related("user"):
            services.token_revoke(token=token, user=request.user)
        self.message_user(request, "Revoked.", messages.SUCCESS)

"""Runs in the admin: for looking up, not for editing. Runs come from ingests and reruns, and
the evidence level moves only through controlled reruns, so every field here is read-only."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import PermissionDenied, ValidationError
from django.template.response import TemplateResponse

from runs.changes.models import CellChange, ChangeReview
from runs.changes.services import changes_review
from runs.extensions import run_extensions
from runs.models import EvidenceEvent, ImportRecord, Run


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["public_id", "benchmark", "implementation", "timed_pass", "evidence", "rank"]
    list_filter = ["evidence", "timed_pass", "metric", "benchmark"]
    search_fields = ["public_id", "external_id"]
    list_select_related = ["benchmark", "implementation"]
    show_full_result_count = False

    @property
    def actions(self):
        # Other apps add theirs through runs.extensions (reruns: order a controlled rerun).
        return run_extensions.admin_actions()

    def get_queryset(self, request):
        return super().get_queryset(request).filter(is_current=True)

    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in Run._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records that only the services write: viewable in the admin, never added, edited or
    deleted there."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(EvidenceEvent)
class EvidenceEventAdmin(ReadOnlyAdmin):
    """Append-only history: viewable, never editable."""

    list_display = ["run", "from_level", "to_level", "outcome", "cause", "created_at"]
    list_filter = ["to_level", "outcome"]


@admin.register(ImportRecord)
class ImportRecordAdmin(ReadOnlyAdmin):
    """The upstream ledger: append-only, viewable, never editable."""

    list_display = ["imported_at", "source", "publication", "location", "outcome", "trigger"]
    list_filter = ["source", "outcome", "trigger"]
    list_select_related = ["source", "publication"]


class ReviewForm(forms.Form):
    reason = forms.CharField(
        max_length=500, required=False, widget=forms.Textarea(attrs={"rows": 3})
    )


def _review_step(modeladmin, request, queryset, *, state: str, verb: str):
    """Acknowledge or dismiss the selected changes, with an intermediate page for the reason
    (required to dismiss); the service keeps the review and the moderation trail."""
    form = ReviewForm(request.POST if "apply" in request.POST else None)
    if form.is_valid():
        try:
            moved = changes_review(
                changes=queryset, reviewer=request.user, state=state,
                reason=form.cleaned_data["reason"],
            )  # fmt: skip
        except (ValidationError, PermissionDenied) as exc:
            form.add_error("reason", getattr(exc, "messages", None) or str(exc))
        else:
            modeladmin.message_user(
                request, f"{verb}: {moved} change{'' if moved == 1 else 's'}.", messages.SUCCESS
            )
            return None
    return TemplateResponse(
        request,
        "admin/runs/change_review.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": f"{verb}: give a reason" if state == ChangeReview.DISMISSED else verb,
            "verb": verb,
            "items": queryset.select_related("benchmark", "publication"),
            "form": form,
            "action": request.POST.get("action"),
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
            "opts": modeladmin.model._meta,
        },
    )


@admin.action(description="Acknowledge the selected changes")
def acknowledge(modeladmin, request, queryset):
    return _review_step(modeladmin, request, queryset, state=ChangeReview.ACKNOWLEDGED,
                        verb="Acknowledge")  # fmt: skip


@admin.action(description="Dismiss the selected changes (not a change of the kernel)")
def dismiss(modeladmin, request, queryset):
    return _review_step(modeladmin, request, queryset, state=ChangeReview.DISMISSED,
                        verb="Dismiss")  # fmt: skip


@admin.register(CellChange)
class CellChangeAdmin(admin.ModelAdmin):
    """Detected changes, for a maintainer to acknowledge or dismiss; the rule writes them, so
    every field is read-only."""

    list_display = ["publication", "benchmark", "provider_key", "kind", "direction", "grouped",
                    "review"]  # fmt: skip
    list_filter = ["kind", "direction", "grouped", "review", "source"]
    search_fields = ["benchmark__slug", "publication__slug", "provider_key"]
    list_select_related = ["publication", "benchmark"]
    show_full_result_count = False
    actions = [acknowledge, dismiss]

    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in CellChange._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ChangeReview)
class ChangeReviewAdmin(ReadOnlyAdmin):
    """Reviews of detected changes; written through the actions on the changes."""

    list_display = ["publication", "cell_key", "provider_key", "state", "reviewed_by",
                    "reviewed_at", "reason"]  # fmt: skip
    list_filter = ["state"]
    list_select_related = ["publication", "reviewed_by"]

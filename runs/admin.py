"""Runs in the admin: for looking up, not for editing. Runs come from ingests and reruns, and
the evidence level moves only through controlled reruns, so every field here is read-only."""

from __future__ import annotations

from django.contrib import admin

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

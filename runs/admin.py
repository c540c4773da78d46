from __future__ import annotations

from django.contrib import admin

from runs.models import EvidenceEvent, Run


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    """Minimal: runs come from ingestion and controlled reruns, never from the admin. The
    evidence level is read-only here; only runs.evidence.evidence_apply changes it."""

    list_display = ["public_id", "revision", "title", "evidence", "is_current"]
    list_filter = ["evidence", "source", "timed_pass", "metric"]
    search_fields = ["public_id", "external_id"]
    readonly_fields = ["evidence", "digest", "spec", "rank"]
    raw_id_fields = [
        "source",
        "publication",
        "benchmark",
        "implementation",
        "workload",
        "protocol",
        "environment",
        "group",
    ]


@admin.register(EvidenceEvent)
class EvidenceEventAdmin(admin.ModelAdmin):
    """Append-only history: viewable, never editable."""

    list_display = ["run", "from_level", "to_level", "outcome", "cause", "created_at"]
    list_filter = ["to_level", "outcome"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

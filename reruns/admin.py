from __future__ import annotations

from django.contrib import admin, messages

from reruns.models import JobState, RejectedResult, RerunJob, ResultReceipt
from reruns.services import (
    NO_BROKER,
    RerunError,
    broker_configured,
    rerun_approve,
    rerun_cancel,
    rerun_dispatch,
    rerun_request,
)
from runs.admin import ReadOnlyAdmin


@admin.register(RerunJob)
class RerunJobAdmin(admin.ModelAdmin):
    list_display = [
        "short_uuid",
        "run",
        "gpu_class",
        "state",
        "attempts",
        "requested_by",
        "created_at",
        "dispatched_at",
        "finished_at",
    ]
    list_filter = ["state", "gpu_class"]
    search_fields = ["uuid", "run__public_id"]
    actions = ["approve", "cancel", "send_again"]

    def get_readonly_fields(self, request, obj=None):
        # Every field: a job changes only through its actions and the services behind them.
        # An editable `run` or `offline` let staff move a queued job onto another run, where
        # it stayed running forever.
        return [f.name for f in self.model._meta.fields]

    @admin.display(description="job")
    def short_uuid(self, job: RerunJob) -> str:
        return str(job.uuid)[:8]

    def has_add_permission(self, request):
        # Jobs are ordered from a run (page or the runs admin action), so that every job
        # goes through rerun_request's checks.
        return False

    def changelist_view(self, request, extra_context=None):
        if not broker_configured():
            messages.warning(request, f"{NO_BROKER}.")
        return super().changelist_view(request, extra_context)

    @admin.action(description="Approve (queue and send)")
    def approve(self, request, queryset):
        done = 0
        for job in queryset.filter(state=JobState.AWAITING_APPROVAL):
            done += rerun_approve(job=job, approved_by=request.user).state == JobState.QUEUED
        self.message_user(request, f"{done} job(s) approved.")

    @admin.action(description="Cancel (not yet running)")
    def cancel(self, request, queryset):
        done = sum(rerun_cancel(job=job) for job in queryset)
        self.message_user(request, f"{done} job(s) cancelled.")

    @admin.action(description="Send queued jobs to the broker again")
    def send_again(self, request, queryset):
        sent = sum(rerun_dispatch(job=job) for job in queryset.filter(state=JobState.QUEUED))
        self.message_user(request, f"{sent} job(s) sent.")


@admin.register(ResultReceipt)
class ResultReceiptAdmin(ReadOnlyAdmin):
    list_display = ["job", "status", "device", "via", "key_id", "received_at"]
    list_filter = ["status", "device", "via"]


@admin.register(RejectedResult)
class RejectedResultAdmin(ReadOnlyAdmin):
    list_display = ["reason", "job_ref", "key_id", "via", "received_at"]
    list_filter = ["reason", "via"]


@admin.action(description="Order controlled rerun (on each run's own GPU class)")
def order_controlled_rerun(modeladmin, request, queryset):
    ordered, problems = 0, []
    for run in queryset:
        try:
            rerun_request(run=run, requested_by=request.user)
            ordered += 1
        except RerunError as exc:
            problems.append(f"{run.public_id}: {exc}")
    modeladmin.message_user(request, f"{ordered} rerun(s) ordered.")
    for problem in problems:
        modeladmin.message_user(request, problem, level=messages.WARNING)
    if ordered and not broker_configured():
        modeladmin.message_user(request, f"{NO_BROKER}.", level=messages.WARNING)

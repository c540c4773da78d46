from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from reruns.forms import RerunRequestForm
from reruns.models import JobState
from reruns.services import RerunError, broker_configured, rerun_request
from runs.models import Run


@require_POST
@login_required
def request_rerun(request: HttpRequest, public_id: str) -> HttpResponse:
    run = Run.objects.with_related().current_or_404(public_id)
    back = redirect(run.get_absolute_url() + "#reruns")
    form = RerunRequestForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose one of the listed GPU classes.")
        return back
    try:
        job = rerun_request(
            run=run, requested_by=request.user, gpu_class=form.cleaned_data["gpu_class"] or None
        )
    except RerunError as exc:
        messages.error(request, str(exc))
        return back
    if job.state == JobState.AWAITING_APPROVAL:
        messages.success(request, "Rerun requested: a maintainer will review it.")
    elif job.dispatched_at:
        messages.success(request, f"Rerun ordered and sent to the queue {job.queue}.")
    elif not broker_configured():
        # The run page says once, above its jobs, why it waits.
        messages.warning(request, "Rerun ordered; it waits as queued.")
    else:
        messages.warning(request, f"Rerun ordered but not sent yet: {job.dispatch_error}")
    return back

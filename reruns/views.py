from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.utils.cache import get_conditional_response, patch_cache_control
from django.views.decorators.http import require_GET, require_POST

from reruns import selfrun
from reruns.forms import RerunRequestForm
from reruns.models import JobState
from reruns.services import RerunError, broker_configured, rerun_request
from runs.models import Run
from runs.read.page_cache import public_page


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


@require_GET
@public_page
def job_file(request: HttpRequest, public_id: str) -> HttpResponse:
    """A run's self-run job file, or 404 with the reason the runner cannot reproduce it. The
    same document for every reader (no nonce: selfrun.self_run_job), from the run data only,
    so it is a public page with the run page's page cache and ETag."""
    run = Run.objects.with_related().current_or_404(public_id)
    reproduce = selfrun.reproduce_for(run)
    if reproduce.problem is not None:
        raise Http404(f"The runner cannot reproduce this run: {reproduce.problem}")
    response = JsonResponse(selfrun.self_run_job(run), json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="{reproduce.job_name}"'
    return response


@require_GET
def runner_archive(request: HttpRequest, filename: str) -> HttpResponse:
    """The runner's wheel that the run pages' commands install (reruns/selfrun.py)."""
    archive = selfrun.runner_archive()
    if filename != archive.name:
        raise Http404(f"This site serves the runner as {archive.name}.")
    etag = f'"{archive.sha256}"'
    # Rebuilt by each deploy under the same version: a client may keep it, but asks first.
    response = get_conditional_response(request, etag=etag) or HttpResponse(
        archive.content, content_type="application/zip"
    )
    response["ETag"] = etag
    patch_cache_control(response, public=True, no_cache=True)
    response["Content-Disposition"] = f'attachment; filename="{archive.name}"'
    return response

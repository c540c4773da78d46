"""Watching's pages: start a watch, the list of one's watches, stop one, and the one-click
unsubscribe link of a notice email (no login: the signed token is the permission)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from attestations.watching import services
from attestations.watching.forms import WatchForm
from attestations.watching.models import Watch
from runs.models import Benchmark, Run, Source


def _target(request: HttpRequest) -> dict:
    """The target named by ?cell=<run id>, ?benchmark=<slug> or ?source=<slug>."""
    query = request.GET
    if "cell" in query:
        run = Run.objects.select_related("group", "implementation").current_or_404(query["cell"])
        return {
            "target": Watch.Target.CELL,
            "run": run,
            "label": f"the cell of run {run.public_id}",
        }
    if "benchmark" in query:
        benchmark = get_object_or_404(Benchmark, slug=query["benchmark"])
        return {"target": Watch.Target.BENCHMARK, "benchmark": benchmark,
                "label": f"the benchmark {benchmark.title}"}  # fmt: skip
    if "source" in query:
        source = get_object_or_404(Source, slug=query["source"])
        return {"target": Watch.Target.SOURCE, "source": source,
                "label": f"the source {source.name}"}  # fmt: skip
    raise Http404("Name what to watch: ?cell=<run id>, ?benchmark=<slug> or ?source=<slug>.")


@login_required
@never_cache
def watch_new(request: HttpRequest) -> HttpResponse:
    target = _target(request)
    label = target.pop("label")
    form = WatchForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            services.watch_start(user=request.user, events=form.cleaned_data, **target)
        except services.WatchError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"You now watch {label}.")
            return redirect("attestations:watching")
    return render(request, "attestations/watching/new.html", {"form": form, "label": label})


@login_required
@never_cache
def watching(request: HttpRequest) -> HttpResponse:
    watches = Watch.objects.filter(user=request.user).select_related("benchmark", "source", "run")
    return render(request, "attestations/watching/list.html", {"watches": watches})


@login_required
@require_POST
def watch_stop(request: HttpRequest, pk: int) -> HttpResponse:
    watch = get_object_or_404(Watch, pk=pk, user=request.user)
    services.watch_stop(watch=watch, user=request.user)
    messages.success(request, "Watch stopped.")
    return redirect("attestations:watching")


# The token is the credential (signed, for one user): a mail client's RFC 8058 one-click POST
# carries no CSRF token, and a forged request cannot forge the signature.
@csrf_exempt
@never_cache
def unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    try:
        signing.loads(token, salt=services.UNSUBSCRIBE_SALT)
    except signing.BadSignature:
        return render(request, "attestations/watching/unsubscribe.html", {"invalid": True},
                      status=400)  # fmt: skip
    if request.method == "POST":
        stopped = services.unsubscribe(token=token)
        return render(request, "attestations/watching/unsubscribe.html", {"stopped": stopped})
    # A GET changes nothing (link scanners follow links): it shows the one button.
    return render(request, "attestations/watching/unsubscribe.html", {"token": token})

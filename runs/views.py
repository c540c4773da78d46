from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render

from runs.canonical import run_manifest
from runs.models import Benchmark, ComparisonGroup, Gpu, Run, Source


def _current_run(public_id: str) -> Run:
    try:
        return Run.objects.public().with_related().get(public_id=public_id)
    except Run.DoesNotExist:
        raise Http404("No run with this id") from None


def run_detail(request: HttpRequest, public_id: str) -> HttpResponse:
    run = _current_run(public_id)
    leader = (
        Run.objects.public().filter(group=run.group, rank=1).exclude(pk=run.pk).first()
        if run.rank and run.rank > 1
        else None
    )
    return render(request, "runs/run_detail.html", {"run": run, "leader": leader})


def run_manifest_json(request: HttpRequest, public_id: str) -> JsonResponse:
    run = _current_run(public_id)
    return JsonResponse(run_manifest(run), json_dumps_params={"indent": 2})


def benchmark_detail(request: HttpRequest, slug: str) -> HttpResponse:
    benchmark = get_object_or_404(Benchmark, slug=slug)
    return render(request, "runs/benchmark_detail.html", {"benchmark": benchmark})


def group_detail(request: HttpRequest, key: str) -> HttpResponse:
    group = get_object_or_404(
        ComparisonGroup.objects.with_related(), key__startswith=f"sha256:{key}"
    )
    runs = Run.objects.public().filter(group=group).with_related().ranked()
    return render(request, "runs/group_detail.html", {"group": group, "runs": runs})


def source_detail(request: HttpRequest, slug: str) -> HttpResponse:
    source = get_object_or_404(Source, slug=slug)
    return render(request, "runs/source_detail.html", {"source": source})


def gpu_detail(request: HttpRequest, slug: str) -> HttpResponse:
    gpu = get_object_or_404(Gpu, slug=slug)
    return render(request, "runs/gpu_detail.html", {"gpu": gpu})

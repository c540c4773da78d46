from __future__ import annotations

import statistics

from django import template
from django.conf import settings
from django.shortcuts import resolve_url

from reruns.forms import RerunRequestForm
from reruns.models import RerunJob
from reruns.services import NO_BROKER, broker_configured
from runs.models import EvidenceEvent

register = template.Library()


def spread(receipt) -> dict | None:
    """Summary of a result's raw samples, in the result's own unit."""
    if receipt is None:
        return None
    m = receipt.measurement
    samples = [s for s in m.get("samples") or [] if isinstance(s, int | float)]
    if not samples:
        return None
    return {
        "n": len(samples),
        "min": min(samples),
        "max": max(samples),
        "median": m.get("median", statistics.median(samples)),
        "p20": m.get("p20"),
        "p80": m.get("p80"),
        "unit": m.get("unit", ""),
        "timer": m.get("timer", ""),
    }


@register.inclusion_tag("reruns/_run_reruns.html", takes_context=True)
def run_reruns(context, run):
    """The run page's "Controlled reruns" section: jobs, evidence history, and the form."""
    jobs = list(
        RerunJob.objects.for_run(run)
        .select_related("requested_by", "receipt__controlled_run")
        .order_by("-created_at")
    )
    rows = []
    for job in jobs:
        receipt = getattr(job, "receipt", None)
        rows.append({"job": job, "receipt": receipt, "spread": spread(receipt)})
    request = context.get("request")
    user = getattr(request, "user", None) or context.get("user")
    return {
        "run": run,
        "rows": rows,
        "events": EvidenceEvent.objects.for_run(run),
        "form": RerunRequestForm(initial={"gpu_class": run.environment.gpu.gpu_class}),
        "user": user,
        "request": request,
        "csrf_token": context.get("csrf_token"),
        "messages": context.get("messages"),
        "is_controlled": run.source.slug == "kernelindex",
        "broker_configured": broker_configured(),
        "no_broker": NO_BROKER,
        "login_url": resolve_url(settings.LOGIN_URL),
    }

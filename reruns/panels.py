"""The run page's "Controlled reruns" panel, registered with runs.extensions."""

from __future__ import annotations

import statistics

from django.conf import settings
from django.http import HttpRequest
from django.shortcuts import resolve_url

from reruns import selfrun
from reruns.forms import RerunRequestForm
from reruns.models import RerunJob, ResultReceipt
from reruns.services import NO_BROKER, broker_configured
from runs.extensions import RunPanel
from runs.models import EvidenceEvent


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
        # What a sample is: a peak-memory reading, or one do_bench call.
        "kind": "peak-memory readings" if m.get("metric") == "memory" else "do_bench samples",
    }


# The sampled windows (kirunner/power.py), in the order the page shows them.
POWER_WINDOWS = (("doBench", "do_bench"), ("deviceTime", "device time"))


def power_windows(receipt) -> list[dict]:
    """Clocks, power and throttle reasons sampled while the result was timed; [] for results
    of runners before the sampler and for memory results."""
    if receipt is None:
        return []
    recorded = receipt.measurement.get("power") or {}
    out = []
    for key, label in POWER_WINDOWS:
        window = recorded.get(key)
        if isinstance(window, dict) and window.get("n"):
            shares = window.get("reasonShares") or {}
            out.append(
                {
                    "label": label,
                    "window": window,
                    "reasons": [
                        {"name": name, "percent": round(share * 100)}
                        for name, share in shares.items()
                    ],
                }
            )
    return out


def run_reruns(request: HttpRequest, run) -> dict:
    """Jobs, evidence history, and the request form."""
    # A run nothing was ever written about (runs.read.freshness.run_activity, set by the run
    # page) has no job: its page asks nothing here.
    active = getattr(run, "activity", None) != 0
    jobs = list(RerunJob.objects.for_run(run).for_panel()) if active else []
    # Every evidence event is caused by one of the run's jobs: no jobs, no events to ask for.
    events = list(EvidenceEvent.objects.for_run(run)) if jobs else []
    # A job's verdict is its newest event: a re-judged result's (manage.py rerun rejudge)
    # replaces the one its receipt recorded.
    verdicts = {e.cause_job: e for e in sorted(events, key=lambda e: (e.created_at, e.pk))}
    rows = []
    for job in jobs:
        receipt = getattr(job, "receipt", None)
        # A job is issued when approved; one loaded from a file was issued before its row
        # existed, so the row's creation time would come after the runner started it.
        issued = job.issued_at or job.created_at
        rows.append(
            {
                "job": job,
                "receipt": receipt,
                "verdict": verdicts.get(job.uuid) or getattr(receipt, "evidence_event", None),
                "spread": spread(receipt),
                "power": power_windows(receipt),
                "issued": issued,
            }
        )
    is_controlled = run.source.slug == "kernelindex"
    user = request.user
    signed_in = user.is_authenticated
    return {
        "run": run,
        "rows": rows,
        "events": events,
        # Only a signed-in reader sees the request form; anonymous pages are the hot path.
        "form": RerunRequestForm(initial={"gpu_class": run.environment.gpu.gpu_class})
        if signed_in
        else None,
        "is_controlled": is_controlled,
        # The no-broker notice concerns jobs that wait, not finished ones.
        # Said once, above the jobs: it concerns jobs that wait and the form that adds one.
        "no_broker_notice": not broker_configured()
        and (
            any(job.state in ("queued", "awaiting-approval") for job in jobs)
            or (signed_in and not is_controlled)
        ),
        "controlled_receipt": (
            ResultReceipt.objects.of_controlled_run(run) if is_controlled else None
        ),
        "broker_configured": broker_configured(),
        "no_broker": NO_BROKER,
        "login_url": resolve_url(settings.LOGIN_URL),
    }


PANEL = RunPanel(
    name="reruns",
    slot="evidence",
    template="reruns/_run_reruns.html",
    context=run_reruns,
    order=10,
    # Signed-in readers get the request form or their own pending items; everyone else
    # sees what the data says.
    same_for_every_anonymous_reader=True,
)


def run_reproduce(request: HttpRequest, run) -> dict:
    """ "Reproduce on your GPU": the self-run job file and its commands, or why not. No query:
    everything comes from the run the page already holds."""
    return {"run": run, "reproduce": selfrun.reproduce_for(run)}


REPRODUCE_PANEL = RunPanel(
    name="reproduce",
    slot="evidence",
    template="reruns/_run_reproduce.html",
    context=run_reproduce,
    order=30,
    same_for_every_anonymous_reader=True,
)

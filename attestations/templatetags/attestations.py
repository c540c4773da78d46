from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from attestations.markdown import render_markdown
from attestations.models import Attestation, Report

register = template.Library()


@register.inclusion_tag("attestations/_run_section.html", takes_context=True)
def run_attestations(context, run):
    """The run page's "Replications and notes": approved items for everyone, plus the viewer's
    own pending ones. Two queries whatever the number of items."""
    items = _visible_items(context, run)
    user = context.get("user") or getattr(context.get("request"), "user", None)
    answered = list(Report.objects.for_run(run).answered_publicly().order_by("answered_at"))
    return {
        "run": run,
        "items": items,
        "answered_reports": answered,
        "user": user,
    }


@register.simple_tag(takes_context=True)
def attestation_count(context, run) -> str:
    """ " (3)" after the section heading when the run has approved attestations, else ""."""
    count = sum(1 for item in _visible_items(context, run) if item.state == "approved")
    return f" ({count})" if count else ""


def _visible_items(context, run) -> list:
    """The items the viewer may see, fetched once per page: the heading's count and the
    section below it read the same list."""
    request = context.get("request")
    user = context.get("user") or getattr(request, "user", None)
    key = getattr(user, "pk", None)
    cached = getattr(run, "_visible_attestations", None)
    if cached is None or cached[0] != key:
        items = list(Attestation.objects.visible_to(user).for_run(run).with_related())
        cached = run._visible_attestations = (key, items)
    return cached[1]


@register.filter
def markdown(text: str) -> SafeString:
    return render_markdown(text)


@register.filter
def measure(value: int | None, unit: str) -> str:
    """385536, "ns" → "385.5 µs"; bytes in KiB/MiB/GiB."""
    if value is None:
        return "—"
    if unit == "ns":
        steps = [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "µs")]
        small = "ns"
    else:
        steps = [(1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB")]
        small = "B"
    for factor, name in steps:
        if abs(value) >= factor:
            return f"{value / factor:.1f} {name}"
    return f"{value} {small}"


@register.filter
def delta(percent: float | None) -> str:
    """+2.1 % vs published; empty when there is nothing to compare."""
    if percent is None:
        return ""
    return f"{percent:+.1f} % vs published"


@register.simple_tag
def moderation_queues() -> dict[str, int]:
    return {
        "pending_attestations": Attestation.objects.pending().count(),
        "open_reports": Report.objects.open().count(),
    }

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from attestations.markdown import render_markdown
from attestations.models import Attestation, Report
from runs.pages.units import scale

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    return render_markdown(text)


@register.filter
def measure(value: int | None, unit: str) -> str:
    """385536, "ns" → "385.5 µs": a reproduction's figures read as the run's own beside them
    (runs.pages.units, the one formatter of measurements)."""
    return scale(value, unit)


@register.filter
def delta(percent: float | None) -> str:
    """+2.1 % vs published; empty when there is nothing to compare."""
    if percent is None:
        return ""
    return f"{percent:+.1f} % vs published"


@register.filter
def comparison(item: Attestation) -> str:
    """ "+2.1 % vs published" on the run's GPU product, else why it is not compared."""
    return delta(item.delta_percent()) or item.not_comparable()


@register.filter
def provenance(item: Attestation) -> str:
    """How a reproduction's figures came to be: measured with a file, or typed in."""
    if not item.is_measured:
        return "reported by the user, no measurement file"
    where = item.gpu.upstream_name if item.gpu else "the CPU"
    return (
        f"measured with kirunner {item.runner_version} on {where} by "
        f"{item.author.username}, not controlled by KernelIndex"
    )


@register.simple_tag
def moderation_queues() -> dict[str, int]:
    return {
        "pending_attestations": Attestation.objects.pending().count(),
        "open_reports": Report.objects.open().count(),
    }

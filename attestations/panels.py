"""The run page's "Replications and notes" section, registered with runs.extensions."""

from __future__ import annotations

from django.http import HttpRequest

from attestations.models import Attestation, Report
from runs.extensions import RunPanel


def run_section(request: HttpRequest, run) -> dict:
    """Approved items for everyone, plus the viewer's own pending ones, and the reports the
    maintainers answered in public. Two queries whatever the number of items."""
    user = request.user
    items = list(Attestation.objects.visible_to(user).for_run(run).with_related())
    return {
        "run": run,
        "items": items,
        "approved": sum(1 for item in items if item.state == "approved"),
        "answered_reports": list(
            Report.objects.for_run(run).answered_publicly().order_by("answered_at")
        ),
        "user": user,
    }


PANEL = RunPanel(
    name="replications",
    slot="sections",
    template="attestations/_run_section.html",
    context=run_section,
    order=10,
)

from __future__ import annotations

from django import template

from runs.claims import read, rule
from runs.claims.models import Verdict

register = template.Library()


@register.simple_tag
def run_claims(run) -> list[dict]:
    """The judged claims a run is a side of (no query: runs/claims/read.py)."""
    return read.for_run(run.pk) if run is not None else []


@register.simple_tag
def group_claims(group) -> list[dict]:
    return read.for_group(group.pk)


@register.simple_tag
def claim_verdicts() -> list[tuple[str, str]]:
    """Each verdict's name and what it means (runs/claims/rule.py), most severe first."""
    labels = dict(Verdict.choices)
    return [(labels[v], rule.MEANING[v]) for v in sorted(rule.MEANING, key=rule.SEVERITY.get)]

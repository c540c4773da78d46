"""Template filters of the runs app: measurements scaled for reading, digests shortened."""

from __future__ import annotations

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from runs.models import Evidence
from runs.pages import listing
from runs.pages.native import native_values as _native_values
from runs.pages.units import scale

register = template.Library()


@register.filter
def measure(value, unit: str) -> str:
    """With a space: `384.7 µs`."""
    return scale(value, unit, " ")


@register.filter
def measure_tight(value, unit: str) -> str:
    """The headline form without a space: `385.5µs`."""
    return scale(value, unit, "")


@register.filter
def short_digest(digest: str, length: int = 16) -> str:
    """sha256:78ac499f974d304d… — enough to recognise, the full value is one click away."""
    if not digest:
        return ""
    algo, _, hexpart = digest.partition(":")
    return f"{algo}:{hexpart[: int(length)]}…"


@register.filter
def group_slug(key: str) -> str:
    return key.removeprefix("sha256:")[:16]


@register.filter
def shape(dims) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


@register.filter
def native_values(run) -> list[tuple[str, str]]:
    """The source's own figures as (label, text): 'p20 384.7 µs', 'trials 100', 'hardware
    NVIDIA H100 80GB HBM3'; the exact values stay in the manifest."""
    return [
        (label, scale(value, unit, digits=digits) if unit else str(value))
        for label, value, unit, digits in _native_values(run.source_metrics or {})
    ]


@register.filter
def spaced(name: str) -> str:
    """ms_20 -> "ms 20": the source's own metric names, readable."""
    return str(name).replace("_", " ")


EVIDENCE_EXPLANATIONS = {
    Evidence.REPORTED: "The source published this number; nobody has re-measured it yet.",
    Evidence.CHECKED: (
        "A KernelIndex-controlled rerun ran this implementation on this workload and its output "
        "matched a reference implementation within the comparator's tolerance."
    ),
    Evidence.REPRODUCED: (
        "A KernelIndex-controlled rerun on the same GPU product reproduced the median within "
        "tolerance."
    ),
    Evidence.NOT_REPRODUCED: (
        "A KernelIndex-controlled rerun on the same GPU product measured a median outside "
        "tolerance."
    ),
    Evidence.INCORRECT: (
        "A KernelIndex-controlled rerun found that this implementation's output did not match "
        "the reference."
    ),
    Evidence.CONTROLLED: "KernelIndex measured this run itself, on a GPU it controls.",
}


@register.simple_tag
def evidence_badge(level: str) -> str:
    """A labelled badge whose title explains the level (a tag, not an include: it is on every
    run page twice and in hot paths)."""
    label = Evidence(level).label if level in Evidence.values else level
    return format_html(
        '<span class="badge evidence evidence-{}" title="{}"><span class="badge-label">'
        "Evidence:</span> {}</span>",
        level,
        EVIDENCE_EXPLANATIONS.get(level, ""),
        label,
    )


@register.simple_tag
def svg(chart) -> str:
    """Charts are built by runs.pages.charts, which escapes every text it places."""
    return mark_safe(chart)  # noqa: S308 - built from escaped parts in runs.pages.charts


CLASSIFICATION_WORDS = {
    "device-bound": "device-bound: our do_bench figure timed the GPU",
    "host-bound": "host-bound: our do_bench figure timed the host enqueuing the call, not the kernel",
    "unexplained": "unexplained: do_bench and the device time disagree, and the host is not why",
}


@register.inclusion_tag("runs/_verdict.html")
def verdict_facts(event, unit: str):
    """An evidence event's verdict in words and figures: the protocol figure, the device time,
    the host time, the classification, the tolerance and the reason (docs/evidence.md)."""
    facts = event.facts or {}
    cls = facts.get("classification") or {}
    rows = []
    # A peak-memory result's figure is a peak, not a do_bench median.
    memory = facts.get("metric") == "memory"
    if facts.get("published") is not None:
        label = "Published peak memory" if memory else "Published median"
        rows.append((label, scale(facts["published"], unit)))
    if facts.get("measured") is not None:
        label = "Our peak memory" if memory else "Our do_bench median"
        rows.append((f"{label} (the protocol's figure)", scale(facts["measured"], unit)))
    if cls:
        method = cls.get("deviceMethod") or ""
        rows += [
            ("Cold device time", f"{scale(cls['deviceMs'] * 1e6, 'ns')} ({method})"),
            ("Host enqueue time per call", scale(cls["hostEnqueueMs"] * 1e6, "ns")),
            ("L2 flush before each call", scale(cls["flushMs"] * 1e6, "ns")),
            ("Classification", CLASSIFICATION_WORDS.get(cls.get("kind"), cls.get("kind"))),
        ]
    if facts.get("tolerance") is not None:
        tolerance = f"±{facts['tolerance'] * 100:.0f}% ({facts.get('toleranceDetail', '')})"
        rows.append(("Tolerance", tolerance))
    rows += _correctness_rows(facts)
    return {
        "event": event,
        "rows": rows,
        "why": facts.get("why", ""),
        "host_dominated": facts.get("hostDominatedFactor"),
        # The fidelity row the verdict rests on or was withheld for (runs/fidelity/).
        "fidelity": facts.get("fidelity"),
        "earlier_harness": facts.get("earlierHarness"),
    }


UPSTREAM_STATES = {
    "within": "within it",
    "outside": "outside it",
    "undecided": "the recorded errors cannot tell",
}


def _correctness_rows(facts: dict) -> list[tuple[str, str]]:
    """The float64 errors (accuracy) and, for a check the runner's criterion failed, upstream's
    own test tolerance and what it says (runs/evidence_correctness.py)."""
    rows = []
    accuracy = [a for a in facts.get("accuracy") or [] if isinstance(a, dict)]
    if accuracy:
        shown = " · ".join(
            f"{a.get('name')} "
            + ("NaN, Inf or none" if a.get("maxAbsErr") is None else f"{a['maxAbsErr']:.2g}")
            + (f" ({a['maxRelErr']:.2g} of max |ref|)" if a.get("maxRelErr") is not None else "")
            for a in accuracy
        )
        rows.append(("Accuracy: largest error against float64 reference maths", shown))
    upstream = facts.get("upstreamCheck") or {}
    tolerance = upstream.get("tolerance") or {}
    if tolerance:
        rows.append(
            (
                "Upstream's own test tolerance",
                f"{tolerance.get('atol'):g} + {tolerance.get('rtol'):g}·|ref| "
                f"({tolerance.get('source')}): "
                + UPSTREAM_STATES.get(upstream.get("state"), str(upstream.get("state"))),
            )
        )
    if facts.get("checkNote"):
        rows.append(("Correctness", facts["checkNote"]))
    return rows


@register.filter
def primary_statistic(run) -> str:
    """The statistic the run's value is (median for Liger, mean for KernelBench), from the
    digested spec, so the label can never disagree with what the manifest says."""
    spec = run.spec or {}
    block = spec.get("timing") or spec.get("memory") or {}
    return block.get("primaryStatistic", "median")


@register.filter
def other_statistics(run) -> dict:
    """{statistic: value} of the run's other measurements (p20/p80, or std/min/max)."""
    return {m.get("statistic"): m.get("value") for m in (run.spec or {}).get("measurements", [])}


# A listing's table rows, kept per data change, and the filter form's fixed choices.
register.simple_tag(listing.table_rows, name="run_rows")
register.simple_tag(listing.choice_options, name="choice_options")

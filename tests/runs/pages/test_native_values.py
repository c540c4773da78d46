"""A run's source-native values read in the page's units and precision, without Python's
quoting, for every source's shape of them; the exact values stay in the manifest."""

from __future__ import annotations

import re

import pytest

from runs.models import Run
from runs.sources.pipeline import ingest
from tests.conftest import KERNELBENCH
from tests.pages import text_of

pytestmark = pytest.mark.django_db


def test_kernelbench_values_are_statistics_trials_and_hardware(client):
    ingest(source_slug="kernelbench", locations=[str(KERNELBENCH)])
    run = Run.objects.public().filter(source__slug="kernelbench").first()
    metrics = run.source_metrics
    text = text_of(client.get(run.get_absolute_url()))
    native = re.search(r"observed [\d-]+ (.*?) \(as upstream wrote them", text).group(1)
    assert "'" not in native  # no Python quoting
    assert f"trials {metrics['num_trials']}" in native
    assert f"hardware {metrics['hardware']} · device {metrics['device']}" in native
    # Upstream rounds to three significant figures: so does the page, in ms or µs.
    mean = metrics["mean"]
    shown = f"{mean:.3g} ms" if mean >= 1 else f"{mean * 1000:.3g} µs"
    assert native.startswith(f"mean {shown} · std ")
    manifest = client.get(f"/runs/{run.public_id}.json").json()
    assert manifest["run"]["spec"]["sourceNative"]["metrics"] == metrics  # exact


def test_liger_values_are_percentiles_in_the_pages_units(client, example_run):
    text = text_of(client.get(example_run.get_absolute_url()))
    assert "p20 384.7 µs · median 385.5 µs · p80 386.2 µs" in text
    primary = text[: text.index("Identity")]
    assert "0.3846847891807556" not in primary and "ms 20" not in primary

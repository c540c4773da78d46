"""The run page's and the Run admin's extension point (runs/extensions.py): the apps built on
runs add their sections and actions by registering them; runs never reaches into them."""

from __future__ import annotations

import pathlib
import re

import pytest
from django.contrib import admin
from django.core.exceptions import ImproperlyConfigured
from django.test import RequestFactory

from reruns.admin import order_controlled_rerun
from runs.extensions import RunExtensions, RunPanel, run_extensions
from runs.models import Run
from tests.factories import RunFactory

RUNS = pathlib.Path(__file__).resolve().parents[1] / "runs"


def test_runs_never_imports_loads_or_patches_the_apps_built_on_it():
    reach = re.compile(
        r"^\s*(from|import)\s+(attestations|reruns)\b|\{%\s*load\s+[^%]*\b(attestations|reruns)\b"
        r"|_registry\["
    )
    found = [
        f"{path.relative_to(RUNS.parent)}:{n}: {line.strip()}"
        for path in sorted(RUNS.rglob("*"))
        if path.suffix in {".py", ".html"} and "migrations" not in path.parts
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if reach.search(line)
    ]
    assert found == []


def test_the_apps_register_their_run_page_panels_and_admin_action():
    assert [p.name for p in run_extensions.panels("evidence")] == [
        "reruns",
        "measured",
        "reproduce",
    ]
    assert [p.name for p in run_extensions.panels("sections")] == ["replications", "watching"]
    assert [p.name for p in run_extensions.panels("benchmark")] == ["measured-by-gpu"]
    run_admin = admin.site._registry[Run]
    assert order_controlled_rerun in run_admin.actions


@pytest.mark.django_db
def test_a_registered_panel_renders_in_its_slot_with_its_own_context():
    registry = RunExtensions()
    registry.register_panel(
        RunPanel(
            name="late",
            slot="sections",
            template="runs/_api_fields.html",
            context=lambda request, run: {"fields": []},
            order=20,
        )
    )
    seen = []

    def early(request, run):
        seen.append(run.public_id)
        return {"fields": []}

    registry.register_panel(RunPanel("early", "sections", "runs/_api_fields.html", early, 10))
    run = RunFactory()
    rendered = registry.render_panels(RequestFactory().get("/"), run)
    assert set(rendered) == {"evidence", "sections"}
    assert rendered["evidence"] == [] and len(rendered["sections"]) == 2
    assert [p.name for p in registry.panels("sections")] == ["early", "late"]
    assert seen == [run.public_id]


def test_a_panel_registered_twice_or_for_an_unknown_slot_is_refused():
    registry = RunExtensions()
    panel = RunPanel("x", "evidence", "runs/_api_fields.html", lambda request, run: {})
    registry.register_panel(panel)
    with pytest.raises(ImproperlyConfigured, match="twice"):
        registry.register_panel(panel)
    with pytest.raises(ImproperlyConfigured, match="slot"):
        registry.register_panel(RunPanel("y", "footer", "runs/_api_fields.html", panel.context))


@pytest.mark.django_db
def test_panels_kept_for_anonymous_readers_follow_the_data_and_never_reach_signed_in_ones(
    client, settings
):
    from django.contrib.auth import get_user_model

    from tests.factories_reruns import job_for

    settings.PAGE_CACHE_SECONDS = 0
    settings.FINGERPRINT_TTL = 0
    run = RunFactory()
    url = f"/runs/{run.public_id}/"
    assert "No controlled reruns yet." in client.get(url).content.decode()
    job = job_for(run)
    page = client.get(url).content.decode()
    assert f'id="rerun-{job.uuid}"' in page and "No controlled reruns yet." not in page
    assert "Log in</a> to request a controlled rerun" in page
    client.force_login(get_user_model().objects.create_user("reader", password="x" * 12))
    page = client.get(url).content.decode()
    assert "Request a controlled rerun" in page and "Log in</a> to request" not in page

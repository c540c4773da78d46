"""The run page's and the Run admin's extension point (runs/extensions.py): the apps built on
runs add their sections and actions by registering them; runs never reaches into them."""

from __future__ import annotations

import ast
import io
import pathlib
import re

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.test import RequestFactory

from reruns.admin import order_controlled_rerun
from runs.extensions import RunExtensions, RunPanel, run_extensions
from runs.models import Run
from tests.factories import RunFactory

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUNS = ROOT / "runs"
BUILT_ON_RUNS = ("attestations", "reruns")
# Another app's name in a string is a tie no import scan sees: a table label, a command name,
# a template path. The product's own words ("a controlled rerun's reruns") are no tie: a name
# counts alone or as the head of a dotted, colon, slash or underscore path.
NAMED = re.compile(r"^(attestations|reruns)$|\b(attestations|reruns)[.:/_]\w")
# Template tags that reach into an app's templates or tag libraries.
TEMPLATE_REACH = re.compile(
    r"\{%\s*(include|extends|load)\s+[^%]*\b(attestations|reruns)\b[^%]*%\}"
)


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _commands_of(app: str) -> set[str]:
    return {p.stem for p in (ROOT / app / "management/commands").glob("[!_]*.py")}


def _python_ties(path: pathlib.Path, commands: set[str]) -> list[str]:
    """Strings naming an app built on runs (docstrings aside: prose may name them), and
    call_command() of one of their commands."""
    tree = ast.parse(path.read_text())
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docs and NAMED.search(node.value):
                found.append(f"{node.lineno}: string {node.value[:60]!r}")
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "call_command":
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and first.value in commands:
                found.append(f"{node.lineno}: call_command({first.value!r})")
    return sorted(found, key=lambda tie: int(tie.split(":")[0]))


def _shared_templates() -> list[pathlib.Path]:
    """runs' templates and the project's that every app's pages extend (base.html, errors);
    the project's admin index, which only staff see, may name the apps."""
    return [*sorted(RUNS.rglob("*.html")), *sorted((ROOT / "templates").glob("*.html"))]


def test_runs_names_no_app_built_on_it_in_strings_commands_or_templates():
    commands = set().union(*(_commands_of(app) for app in BUILT_ON_RUNS))
    assert "rerun" in commands
    found = [
        f"{path.relative_to(ROOT)}:{tie}"
        for path in sorted(RUNS.rglob("*.py"))
        if "migrations" not in path.parts
        for tie in _python_ties(path, commands)
    ]
    found += [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in _shared_templates()
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if TEMPLATE_REACH.search(line)
    ]
    assert found == []


def test_the_scans_find_a_tie_when_there_is_one(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""Docstrings may name attestations."""\n'
        'APPS = {"runs", "attestations"}\n'
        'call_command("rerun", "load-demo")\n'
    )
    assert _python_ties(sample, {"rerun"}) == [
        "2: string 'attestations'",
        "3: call_command('rerun')",
    ]
    assert TEMPLATE_REACH.search('{% include "attestations/_account_nav.html" %}')
    assert TEMPLATE_REACH.search("{% load attestations %}")
    assert not TEMPLATE_REACH.search("{% include fragment %}")


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


def test_the_apps_declare_their_demo_data_public_tables_and_page_fragments():
    from runs.read import freshness

    assert [loader.name for loader in run_extensions.demo_loaders()] == ["controlled-reruns"]
    versioned = {model._meta.label_lower for model in freshness.versioned_models()}
    assert {label.split(".")[0] for label in versioned} == {"runs", "attestations", "reruns"}
    assert {"runs.run", "attestations.attestation", "reruns.rerunjob"} <= versioned
    private = {"attestations.apitoken", "attestations.watch", "attestations.notice"}
    assert not versioned & (private | {"runs.version", "runs.tally"})
    assert run_extensions.site_fragments() == {
        "header": ["attestations/_account_nav.html"],
        "footer": [],
    }


def test_the_project_registers_its_own_deploy_checks():
    from django.core.checks import registry

    from kernelindex.checks import site_root_configured

    assert site_root_configured in registry.registry.get_checks(include_deployment_checks=True)
    assert "kernelindex.checks" not in (ROOT / "attestations/apps.py").read_text()


@pytest.mark.django_db
def test_the_demo_command_runs_every_registered_loader_in_order(monkeypatch):
    from django.core.management import call_command

    from runs.extensions import DemoLoader

    registry = RunExtensions()
    seen = []
    registry.register_demo_loader(DemoLoader("late", lambda data: seen.append(("late", data))))
    registry.register_demo_loader(DemoLoader("early", lambda data: seen.append(("early", data)), 1))
    with pytest.raises(ImproperlyConfigured, match="twice"):
        registry.register_demo_loader(DemoLoader("late", print))
    monkeypatch.setattr("runs.management.commands.demo.run_extensions", registry)
    monkeypatch.setattr("runs.management.commands.demo.call_command", lambda *a, **k: None)
    call_command("demo", "--no-serve", stdout=io.StringIO())
    data = pathlib.Path(__file__).resolve().parents[2] / "data"
    assert seen == [("early", data), ("late", data)]


@pytest.mark.django_db
def test_the_demo_loads_without_debugs_query_log_and_logs_again_after(monkeypatch, settings):
    """Under DEBUG (the quick start's) the loaders' statements are not logged: the load is
    some 150,000 of them. Queries after the load are logged as before."""
    from django.core.management import call_command
    from django.db import connection

    from runs.extensions import DemoLoader

    settings.DEBUG = True
    logged = []

    def load(data):
        before = len(connection.queries_log)
        list(get_user_model().objects.all())
        logged.append(len(connection.queries_log) - before)

    registry = RunExtensions()
    registry.register_demo_loader(DemoLoader("reads", load))
    monkeypatch.setattr("runs.management.commands.demo.run_extensions", registry)
    monkeypatch.setattr("runs.management.commands.demo.call_command", lambda *a, **k: None)
    call_command("demo", "--no-serve", stdout=io.StringIO())
    assert logged == [0]
    before = len(connection.queries_log)
    list(get_user_model().objects.all())
    assert len(connection.queries_log) == before + 1


@pytest.mark.django_db
def test_a_registered_header_fragment_is_on_every_page(client):
    page = client.get("/runs/").content.decode()
    assert 'class="account-nav"' in page and "Log in</a>" in page
    with pytest.raises(ImproperlyConfigured, match="slot"):
        RunExtensions().register_site_fragment("sidebar", "x.html")


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


@pytest.mark.django_db
def test_a_quiet_runs_panels_are_kept_with_its_sections_for_anonymous_readers_only(
    client, settings
):
    """A run nothing was written about: an anonymous reader's panels are rendered with the
    page's sections and kept with them, not stored apart; a signed-in reader's never are, and
    a page computed first for a signed-in reader or for the manifest still gives anonymous
    readers their own panels."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from runs.read import store
    from runs.read.freshness import DATA, cached_key, run_page
    from tests.factories_attestations import AttestationFactory

    settings.PAGE_CACHE_SECONDS = 0
    run = RunFactory()
    url = f"/runs/{run.public_id}/"
    anonymous = "Log in</a> to request a controlled rerun"
    signed_in = Client()
    signed_in.force_login(get_user_model().objects.create_user("reader", password="x" * 12))

    def kept(name: str, scopes) -> object:
        return store.get(cached_key(name, scopes))

    # The first reader after a data change is signed in: no panels are kept with the
    # sections, and anonymous readers get theirs, kept apart.
    page = signed_in.get(url).content.decode()
    assert "Request a controlled rerun" in page and anonymous not in page
    assert kept(f"run-page:{run.public_id}", [DATA])["quiet_panels"] is None
    page = client.get(url).content.decode()
    assert anonymous in page and "Request a controlled rerun" not in page
    assert kept(f"run-panels:{run.pk}", run_page(run.public_id)) is not None

    RunFactory()  # a data change retires both; the manifest is asked for first
    assert client.get(f"/runs/{run.public_id}.json").status_code == 200
    assert anonymous in client.get(url).content.decode()

    RunFactory()
    page = client.get(url).content.decode()
    assert anonymous in page and "No controlled reruns yet." in page
    quiet = kept(f"run-page:{run.public_id}", [DATA])["quiet_panels"]
    assert any(anonymous in panel for slot in quiet.values() for panel in slot)
    assert kept(f"run-panels:{run.pk}", run_page(run.public_id)) is None
    # Kept with the sections, they never reach a signed-in reader.
    page = signed_in.get(url).content.decode()
    assert "Request a controlled rerun" in page and anonymous not in page
    # A write about the run (an approved note) and its page shows it: the sections kept
    # before it, with the run they were rendered from, are still used, the quiet panels not.
    author = get_user_model().objects.get(username="reader")
    AttestationFactory(
        run=run, author=author, kind="note", state="approved", body="Seen on my box too."
    )
    page = client.get(url).content.decode()
    assert "Seen on my box too." in page and "No attestations yet." not in page
    assert kept(f"run-page:{run.public_id}", [DATA])["quiet_panels"] is not None

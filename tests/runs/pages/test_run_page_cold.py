"""A run page read for the first time (a reader arriving from a link): the parts written in
Python instead of a template loop say exactly what the template said."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.template import engines

from runs.models import Run
from runs.pages import run_sections
from runs.pages.units import scale
from runs.read import freshness
from runs.sources.pipeline import ingest
from tests.synthetic_ci import write_history

# The history list as _history.html wrote it with a loop, before run_sections._items.
TEMPLATE_LOOP = (
    "{% load runs_tags %}{% for h in history.points %}<li>{% if h.pk == run.pk %}<strong>"
    "{{ h.publication__slug }}: {{ h.median|measure:run.unit }} (this run)</strong>{% else %}"
    '<a href="/runs/{{ h.public_id }}/">{{ h.publication__slug }}</a>: '
    "{{ h.median|measure:run.unit }}{% endif %}</li>{% endfor %}"
)


def _point(pk, public_id, slug, median):
    return {"pk": pk, "public_id": public_id, "publication__slug": slug, "median": median}


@pytest.mark.parametrize("unit", ["ns", "B", "x"])
def test_the_history_list_is_what_the_template_loop_wrote(unit):
    run = SimpleNamespace(pk=2, unit=unit)
    points = [
        _point(1, "0a1b2c3d", "commit-1", 385536.0),
        _point(2, "1a1b2c3d", "a&b <tag> \"quoted\" 'single'", 0.5),
        _point(3, "2a1b2c3d", "commit-3", None),
        _point(4, "3a1b2c3d", "commit-4", 12_345_678_901.0),
    ]
    loop = engines["django"].from_string(TEMPLATE_LOOP)
    expected = loop.render({"history": {"points": points}, "run": run})
    assert run_sections._items(run, points) == expected
    assert "&lt;tag&gt;" in expected and "(this run)</strong>" in expected


def test_no_points_no_items():
    assert run_sections._items(SimpleNamespace(pk=1, unit="ns"), []) == ""


@pytest.mark.django_db
def test_a_cold_run_page_lists_its_cell_around_it(client, settings, tmp_path):
    """Three CI runs of one cell: each page, read first, bolds its own run with its median and
    links the other two."""
    settings.PAGE_CACHE_SECONDS = 0
    write_history(tmp_path, {("cold_kernel", "liger"): [1.0, 1.5, 2.0]})
    ingest(source_slug="liger-kernel-ci", locations=[str(tmp_path)])
    cell = list(Run.objects.public().filter(benchmark__slug="cold_kernel"))
    assert len(cell) == 3 and len({run.history_key for run in cell}) == 1
    for run in cell:
        freshness.reset()
        html = client.get(f"/runs/{run.public_id}/").content.decode()
        listed = html.split('<ol class="history-list">', 1)[1].split("</ol>", 1)[0]
        assert listed.count("<li>") == 3
        own = f"<strong>{run.publication.slug}: {scale(run.median, run.unit)} (this run)</strong>"
        assert own in listed
        for other in cell:
            link = f'<a href="/runs/{other.public_id}/">{other.publication.slug}</a>'
            assert (link in listed) == (other.pk != run.pk)

"""The upstream ledger: append-only like the evidence history, and a page per source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from runs.models import ImportRecord
from runs.sources.pipeline import ingest
from tests.conftest import KERNELBENCH

pytestmark = pytest.mark.django_db
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def entry(db):
    ingest(source_slug="kernelbench", locations=[str(KERNELBENCH / "H100_Modal")])
    return ImportRecord.objects.order_by("id").first()


def test_entries_cannot_be_changed_or_deleted(entry):
    entry.rows = 1
    for attempt in (
        entry.save,
        entry.delete,
        lambda: ImportRecord.objects.filter(pk=entry.pk).update(rows=1),
        lambda: ImportRecord.objects.filter(pk=entry.pk).delete(),
        lambda: ImportRecord.objects.bulk_update([entry], ["rows"]),
    ):
        with pytest.raises(ValueError, match="append-only"):
            attempt()
    assert ImportRecord.objects.get(pk=entry.pk).rows == 250


def test_only_the_pipeline_writes_entries():
    """ImportRecord rows are created in one place: runs/sources/ledger.py."""
    offenders = []
    for path in [*REPO.glob("*/**/*.py")]:
        if ".venv" in path.parts or "tests" in path.parts or "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("create", "bulk_create", "get_or_create", "update_or_create")
                and "ImportRecord" in ast.unparse(node.value)
            ):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert [o.rsplit(":", 1)[0] for o in offenders] == ["runs/sources/ledger.py"]


def test_admin_shows_but_never_edits(entry, client):
    from tests.factories_attestations import login_staff, make_staff

    login_staff(client, make_staff())
    base = "/admin/runs/importrecord/"
    assert client.get(base).status_code == 200
    assert client.get(f"{base}add/").status_code == 403
    assert client.post(f"{base}{entry.pk}/change/", {"rows": 1}).status_code == 403
    assert client.post(f"{base}{entry.pk}/delete/", {"post": "yes"}).status_code == 403
    assert ImportRecord.objects.get(pk=entry.pk).rows == 250


def test_ledger_page_per_source(entry, client, django_assert_max_num_queries):
    with django_assert_max_num_queries(3):
        page = client.get("/sources/kernelbench/ledger/")
    text = page.content.decode()
    assert page.status_code == 200
    assert text.count('<code class="wrap">H100_Modal/baseline_time_torch') == 2
    assert entry.sha256 in text and "14a3f7bd2f9c" in text
    assert client.get("/sources/nope/ledger/").status_code == 404
    assert client.get("/sources/kernelbench/ledger/?page=99").status_code == 200

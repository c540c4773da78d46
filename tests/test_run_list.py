"""Browse and search at /runs/: every filter, free text, sorting, pagination, bad input."""

from __future__ import annotations

import pytest

from runs.models import Evidence, Run
from tests.factories import BenchmarkFactory, GpuFactory, RunFactory, SourceFactory
from tests.pages import text_of


@pytest.fixture
def mixed(db):
    rope = BenchmarkFactory()
    norm = BenchmarkFactory(slug="rms_norm")
    a100 = GpuFactory(
        upstream_name="NVIDIA A100-SXM4-80GB",
        slug="nvidia-a100-sxm4-80gb",
        product="NVIDIA A100",
        form_factor="SXM4-80GB",
        architecture="sm_80",
    )
    ci = SourceFactory(slug="liger-kernel-ci", name="Liger-Kernel CI benchmarks")
    return {
        "rope_liger": RunFactory(benchmark=rope, provider="liger", median=1_000),
        "rope_hf": RunFactory(benchmark=rope, provider="huggingface", median=3_000),
        "norm_torch": RunFactory(benchmark=norm, provider="torch", median=2_000, gpu=a100),
        "rope_back": RunFactory(benchmark=rope, provider="liger", timed_pass="backward"),
        "ci": RunFactory(benchmark=rope, provider="liger", source=ci),
        "checked": RunFactory(benchmark=norm, provider="liger", evidence=Evidence.CHECKED),
    }


def ids(response) -> set[str]:
    return {r.public_id for r in response.context["page"].object_list}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("benchmark=rms_norm", {"norm_torch", "checked"}),
        ("implementation=huggingface", {"rope_hf"}),
        ("gpu=nvidia-a100-sxm4-80gb", {"norm_torch"}),
        ("timed_pass=backward", {"rope_back"}),
        ("metric=memory", set()),
        ("dtype=bf16", {"rope_liger", "rope_hf", "norm_torch", "rope_back", "ci", "checked"}),
        ("dtype=fp32", set()),
        ("source=liger-kernel-ci", {"ci"}),
        ("evidence=checked", {"checked"}),
        ("q=rotary", {"rope_liger", "rope_hf", "rope_back", "ci"}),
        ("q=Transformers", {"rope_hf"}),
        ("q=rms&implementation=torch", {"norm_torch"}),
    ],
)
def test_filters(client, mixed, query, expected):
    response = client.get(f"/runs/?{query}")
    assert response.status_code == 200
    assert ids(response) == {mixed[name].public_id for name in expected}


def test_sorting_by_median(client, mixed):
    response = client.get("/runs/?benchmark=llama4_rope&timed_pass=forward&ordering=median")
    medians = [r.median for r in response.context["page"].object_list]
    assert medians == sorted(medians) and len(medians) == 3
    response = client.get("/runs/?benchmark=llama4_rope&timed_pass=forward&ordering=-median")
    assert [r.median for r in response.context["page"].object_list] == sorted(medians, reverse=True)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("evidence=bogus", "evidence"),
        ("timed_pass=sideways", "timed_pass"),
        ("ordering=price", "ordering"),
        ("metric=speed", "metric"),
    ],
)
def test_bad_filter_values_are_400_with_a_message(client, mixed, query, message):
    response = client.get(f"/runs/?{query}")
    assert response.status_code == 400
    assert "Some filters could not be used" in text_of(response)
    assert message in text_of(response)


@pytest.mark.django_db
def test_pagination(client):
    RunFactory.create_batch(55)
    first = client.get("/runs/")
    assert len(first.context["page"].object_list) == 50
    assert "page 1 of 2" in text_of(first) and 'rel="next"' in first.content.decode()
    second = client.get("/runs/?page=2")
    assert len(second.context["page"].object_list) == 5
    assert not ids(first) & ids(second)
    # Out of range or junk page numbers clamp instead of failing.
    assert client.get("/runs/?page=99").status_code == 200
    assert client.get("/runs/?page=abc").status_code == 200


@pytest.mark.django_db
def test_superseded_revisions_are_not_listed(client):
    run = RunFactory()
    Run.objects.filter(pk=run.pk).update(is_current=False)
    from runs.read.freshness import data_changed

    data_changed()
    assert run.public_id not in ids(client.get("/runs/"))

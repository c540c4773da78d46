"""The compare view that `Compare with #1` opens."""

from __future__ import annotations

import pytest

from runs.models import Run
from tests.factories import GpuFactory, RunFactory
from tests.pages import text_of


def test_example_against_its_leader(client, example_run):
    leader = Run.objects.public().get(group=example_run.group, rank=1)
    response = client.get(f"/runs/{example_run.public_id}/compare/{leader.public_id}/")
    assert response.status_code == 200
    html = response.content.decode()
    text = text_of(response)
    assert "Comparable: both runs are in the same comparison group" in text
    assert "Ratio of medians: 3.293×" in text and "is 3.29× faster" in text
    # Only the implementation digest differs: its inputs are highlighted, the others are not.
    assert "different implementation digest" in text
    for same in ("same workload digest", "same protocol digest", "same environment digest"):
        assert same in text
    assert (
        '<tr class="differs"><th scope="row">provider <span class="visually-hidden">(differs)</span></th><td>huggingface</td><td>liger</td>'
        in html
    )
    assert '<tr><th scope="row">hardware.product</th>' in html
    assert '<tr><th scope="row">inputs[0].shape</th><td>[1, 4096, 32, 256]</td>' in html


@pytest.mark.django_db
def test_runs_on_different_gpus_are_not_comparable(client):
    a = RunFactory()
    b = RunFactory(
        gpu=GpuFactory(
            upstream_name="NVIDIA A100-SXM4-80GB",
            slug="nvidia-a100-sxm4-80gb",
            product="NVIDIA A100",
            form_factor="SXM4-80GB",
            architecture="sm_80",
        )
    )
    text = text_of(client.get(f"/runs/{a.public_id}/compare/{b.public_id}/"))
    assert "Not comparable: they ran on different hardware." in text
    assert "different environment digest" in text


@pytest.mark.django_db
def test_compare_with_unknown_run_is_404(client):
    a = RunFactory()
    assert client.get(f"/runs/{a.public_id}/compare/ffffffff/").status_code == 404
    assert client.get(f"/runs/{a.public_id}/compare/nope/").status_code == 404

"""Upstream names are arbitrary text: every URL built from one works (issue 9, defect 3)."""

from __future__ import annotations

from django.urls import resolve, reverse

from runs.pages.converters import name_to_segment, segment_to_name
from tests.factories import BenchmarkFactory, RunFactory

NAMES = ["rope/v2", "50%_cut", "with space", ".", "..", "a.b", "ü名_kernel", "~tilde", "q?x#y&z"]


def test_any_name_maps_to_one_segment_and_back():
    for name in [*NAMES, "x" * 200, "é" * 200, "-", "dyt_beta=False"]:
        url = reverse("runs:benchmark", args=[name])
        assert url.count("/") == 3, url
        assert resolve(url).kwargs["slug"] == name
        assert segment_to_name(name_to_segment(name)) == name
    # Plain names keep their existing URLs.
    assert reverse("runs:benchmark", args=["dyt_beta=False"]) == "/benchmarks/dyt_beta=False/"
    # Each name has one URL: a ~segment that spells a plain name, or garbage, is a 404.
    for bad in ("~ZHl0", "~!!!", "~", "a%00b", ".hidden"):
        try:
            resolve(f"/benchmarks/{bad}/")
        except Exception as exc:  # noqa: BLE001 - Resolver404
            assert type(exc).__name__ == "Resolver404"
        else:
            raise AssertionError(f"{bad} resolved")


def test_pages_built_from_hostile_names_answer(client, db):
    runs = [RunFactory(benchmark=BenchmarkFactory(slug=name)) for name in NAMES]
    for url in ("/", "/api/v1/benchmarks/", "/runs/", "/feeds/runs.atom"):
        assert client.get(url).status_code == 200, url
    for run in runs:
        for url in (
            run.get_absolute_url(),
            run.group.get_absolute_url(),
            run.benchmark.get_absolute_url(),
            reverse("api:benchmark", args=[run.benchmark.slug]),
        ):
            response = client.get(url)
            assert response.status_code == 200, (run.benchmark.slug, url)
        body = client.get(reverse("api:benchmark", args=[run.benchmark.slug])).json()
        assert body["slug"] == run.benchmark.slug

"""The page cache is keyed on the Host header, and absolute links come from SITE_ROOT only
(issue 9, defect 9)."""

from __future__ import annotations

from tests.factories import RunFactory


def test_a_page_built_for_one_host_is_not_served_to_another(client, db, settings):
    settings.PAGE_CACHE_SECONDS = 300
    settings.SITE_ROOT = "https://kernelindex.example.org"
    RunFactory()
    first = client.get("/runs/", HTTP_HOST="localhost")
    assert first["X-Page-Cache"] == "miss"
    assert client.get("/runs/", HTTP_HOST="localhost")["X-Page-Cache"] == "hit"
    assert client.get("/runs/", HTTP_HOST="127.0.0.1")["X-Page-Cache"] == "miss"
    for host in ("localhost", "127.0.0.1"):
        body = client.get("/feeds/runs.atom", HTTP_HOST=host).content.decode()
        assert "https://kernelindex.example.org/runs/" in body
        assert f"http://{host}" not in body

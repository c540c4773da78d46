"""Absolute links come from one origin: the request's under DEBUG with SITE_ROOT unset (the
demo served anywhere), SITE_ROOT in production, for pages and the API alike; a Host header
that ALLOWED_HOSTS admits never reaches a link or a cursor."""

from __future__ import annotations

import re

import pytest

from tests.factories import RunFactory

pytestmark = pytest.mark.django_db

ABSOLUTE = re.compile(r"https?://[^\s\"'<>{}\\]+")


@pytest.fixture
def runs(db):
    return [RunFactory() for _ in range(3)]


def _bodies(client, run, host: str) -> dict[str, str]:
    get = lambda url: client.get(url, HTTP_HOST=host)  # noqa: E731
    api = get("/api/v1/runs/?page_size=1").json()
    return {
        "run page": get(run.get_absolute_url()).content.decode(),
        "home": get("/").content.decode(),
        "bibtex": get(f"/runs/{run.public_id}/cite.bib").content.decode(),
        "csl": get(f"/runs/{run.public_id}/cite.csl.json").content.decode(),
        "feed": get("/feeds/runs.atom").content.decode(),
        "api root": get("/api/v1/").content.decode(),
        "api list": str(api),
        # The cursor link, followed on the same host.
        "api next page": str(get(re.sub(r"^https?://[^/]+", "", api["next"])).json()),
    }


def test_under_debug_without_site_root_links_follow_the_request(client, runs, settings):
    settings.DEBUG = True
    settings.SITE_ROOT_CONFIGURED = False
    settings.ALLOWED_HOSTS = ["ki.lan"]
    bodies = _bodies(client, runs[0], "ki.lan:8101")
    for name, body in bodies.items():
        links = ABSOLUTE.findall(body)
        site = [u for u in links if "localhost" in u or "ki.lan" in u]
        assert site, name  # every one of these names the site somewhere
        assert all(u.startswith("http://ki.lan:8101/") for u in site), (name, site)
    assert (
        f'<link rel="canonical" href="http://ki.lan:8101/runs/{runs[0].public_id}/">'
        in (bodies["run page"])
    )


def test_in_production_site_root_is_the_one_origin_whatever_the_host(client, runs, settings):
    settings.DEBUG = False
    settings.SITE_ROOT = "https://kernelindex.example.org"
    settings.SITE_ROOT_CONFIGURED = True
    settings.ALLOWED_HOSTS = ["kernelindex.example.org", "evil.example"]
    bodies = _bodies(client, runs[0], "evil.example")
    for name, body in bodies.items():
        assert "evil.example" not in body, name
        assert "https://kernelindex.example.org/" in body, name
    api = client.get("/api/v1/runs/?page_size=1", HTTP_HOST="evil.example").json()
    assert api["next"].startswith("https://kernelindex.example.org/api/v1/runs/?cursor=")
    assert api["results"][0]["url"].startswith("https://kernelindex.example.org/runs/")


def test_under_debug_without_site_root_no_cached_thing_carries_one_host_to_another(
    client, runs, settings
):
    """Every layer that keeps a page or a part of one (the page cache, the values kept for
    pages in the shared cache and in each process's copy, the ETag) keeps it per origin when
    links follow the request: the same demo opened as localhost and as the machine's address
    gives each its own links."""
    settings.DEBUG = True
    settings.SITE_ROOT_CONFIGURED = False
    settings.ALLOWED_HOSTS = ["alpha.example", "beta.example"]
    run = runs[0]
    # (url, served from the page cache): the others still keep parts (kept, cached_many).
    urls = [
        ("/api/v1/runs/?page_size=2", True),  # each run kept apart (cached_many)
        (f"/api/v1/runs/{run.public_id}/", True),  # kept whole (kept)
        (run.get_absolute_url(), True),  # its sections kept in the process's copy
        ("/", True),
        ("/feeds/runs.atom", True),
        (f"/runs/{run.public_id}/cite.bib", False),
        (f"/runs/{run.public_id}/cite.csl.json", False),
    ]
    for url, page_cached in urls:
        alpha = client.get(url, HTTP_HOST="alpha.example")
        again = client.get(url, HTTP_HOST="alpha.example")
        beta = client.get(url, HTTP_HOST="beta.example")
        assert alpha.status_code == again.status_code == beta.status_code == 200, url
        assert "http://alpha.example/" in again.content.decode(), url
        body = beta.content.decode()
        assert "alpha.example" not in body, url
        assert "http://beta.example/" in body, url
        if not page_cached:
            continue
        assert again["X-Page-Cache"] == "hit" and beta["X-Page-Cache"] == "miss", url
        # A browser that kept alpha's copy never gets a 304 for beta's page.
        assert beta["ETag"] != alpha["ETag"], url
        asked = client.get(url, HTTP_HOST="beta.example", HTTP_IF_NONE_MATCH=alpha["ETag"])
        assert asked.status_code == 200, url

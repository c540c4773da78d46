"""A crawl of the site over whatever data the database holds: every page kind, the choice links
each page offers, and the same-site links on each, through Django's test client.

It records, per page kind, how many pages it requested; how many links it followed; every
answer of 500 or more; every link that answers 404 (or any 4xx); every absolute link to a host
that is neither the site's own origin nor an upstream project's. tests/site/test_crawl.py runs it
over the full demo data; `python manage.py shell -c "from tests.crawl import main; main()"`
prints the same figures for the database DATABASE_URL names.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from html import unescape
from urllib.parse import parse_qsl, urlsplit

# Where pages may link off the site: the upstream projects' repositories, nothing else (and
# the SVG namespace, www.w3.org, which is a name, not a link).
UPSTREAM_HOSTS = {"github.com", "raw.githubusercontent.com"}
HREF = re.compile(r'\b(?:href|src|action)="([^"]*)"')
ABSOLUTE = re.compile(r"""https?://[^\s"'<>\\)]+""")
# Links that change state, download exports or leave pages; never followed.
NOT_FOLLOWED = re.compile(
    r"^/(accounts/logout|admin/)|/export\.|/cite\.|\.atom$|^/static/|/reruns/$|/attest/$|/report/$"
)
SHAPE = re.compile(r"(?<=/)[^/]+(?=/)")
CHOICES = re.compile(r'<nav class="choices".*?</nav>', re.S)


@dataclass
class Crawl:
    client: object
    host: str  # the configured origin's host, e.g. kernelindex.example.org
    link_budget: int = 3000
    choice_budget: int = 40  # choice links followed from one page
    # Same-shape links checked from one page (/runs/<id>/ … differ only in the id; a page
    # of a benchmark lists hundreds).
    per_shape: int = 3
    pages: Counter = field(default_factory=Counter)
    links_followed: int = 0
    server_errors: list = field(default_factory=list)
    broken_links: list = field(default_factory=list)
    foreign_links: list = field(default_factory=list)
    statuses: dict = field(default_factory=dict)
    _checked: set = field(default_factory=set)
    _crawled: set = field(default_factory=set)

    def get(self, url: str):
        response = self.client.get(url, HTTP_HOST=self.host, secure=True)
        self.statuses[url] = response.status_code
        if response.status_code >= 500:
            self.server_errors.append((url, response.status_code))
        return response

    def page(self, kind: str, url: str, *, follow_choices: bool = False, expect: int = 200):
        """Request a page, check its links, and (for benchmark pages) each choice it offers."""
        if url in self._crawled:
            return None
        self._crawled.add(url)
        self.pages[kind] += 1
        response = self.get(url)
        if response.status_code != expect:
            self.broken_links.append((f"{kind} page", url, response.status_code))
            return response
        body = response.content.decode()
        self._check_hosts(url, body)
        if "html" in response.get("Content-Type", ""):
            self._check_links(url, body)
            if follow_choices:
                for choice in self.choice_links(url, body)[: self.choice_budget]:
                    self.page(kind + " choice", choice)
        return response

    @staticmethod
    def choice_links(url: str, body: str) -> list[str]:
        nav = CHOICES.search(body)
        base = urlsplit(url).path
        found = re.findall(r'href="(\?[^"]*)"', nav.group(0)) if nav else []
        return [base + unescape(q) for q in dict.fromkeys(found)]

    def _check_hosts(self, url: str, body: str) -> None:
        for link in ABSOLUTE.findall(unescape(body)):
            host = urlsplit(link).hostname or ""
            if host != self.host and host not in UPSTREAM_HOSTS and not host.endswith(".w3.org"):
                self.foreign_links.append((url, link))

    def _check_links(self, url: str, body: str) -> None:
        base = urlsplit(url).path
        shapes: Counter = Counter()
        for href in HREF.findall(body):
            href = unescape(href).split("#")[0]
            parts = urlsplit(href)
            if parts.scheme and parts.hostname != self.host:
                continue  # off the site: _check_hosts judged the host
            if not href or href.startswith(("mailto:", "javascript:")):
                continue
            path = parts.path or base
            target = path + (f"?{parts.query}" if parts.query else "")
            if NOT_FOLLOWED.search(path) or target in self._checked:
                continue
            shape = (SHAPE.sub("*", path), tuple(sorted(k for k, _ in parse_qsl(parts.query))))
            shapes[shape] += 1
            if shapes[shape] > self.per_shape:
                continue
            if len(self._checked) >= self.link_budget:
                return
            self._checked.add(target)
            self.links_followed += 1
            status = self.statuses.get(target) or self.get(target).status_code
            if status >= 400:
                self.broken_links.append((url, target, status))

    def report(self) -> str:
        lines = [f"{kind}: {n} pages" for kind, n in sorted(self.pages.items())]
        lines.append(f"links followed: {self.links_followed}")
        lines.append(f"requests: {len(self.statuses)}")
        lines.append(f"5xx: {len(self.server_errors)}")
        lines.append(f"broken links: {len(self.broken_links)}")
        lines.append(f"links to other hosts: {len(self.foreign_links)}")
        return "\n".join(lines)


def spread(ids: list, n: int) -> list:
    """n items spread evenly over a list (all of them when it is shorter)."""
    if len(ids) <= n:
        return ids
    step = len(ids) / n
    return [ids[int(i * step)] for i in range(n)]


def crawl_site(crawl: Crawl, *, groups_per_source: int = 25, runs_per_level: int = 3) -> Crawl:
    """Every benchmark, GPU, source and ledger page; a spread of group pages per source; run
    pages of every source and evidence level (with their manifests and history); home, browse,
    the API root and lists."""
    from runs.models import Benchmark, ComparisonGroup, Gpu, Run, Source

    crawl.page("home", "/")
    crawl.page("browse", "/runs/", follow_choices=True)
    for url in (
        "/api/v1/",
        "/api/v1/runs/?page_size=5",
        "/api/v1/benchmarks/",
        "/api/v1/sources/",
        "/api/v1/groups/?page_size=5",
        "/feeds/runs.atom",
    ):
        crawl.page("api", url)  # fmt: skip
    crawl.page("not found", "/no/such/page/", expect=404)
    crawl.page("not found", "/runs/deadbeef/", expect=404)
    with_runs = Run.objects.public().values("benchmark").distinct()
    for slug in (
        Benchmark.objects.filter(pk__in=with_runs).order_by("slug").values_list("slug", flat=True)
    ):
        crawl.page("benchmark", f"/benchmarks/{slug}/", follow_choices=True)
    for slug in Gpu.objects.order_by("slug").values_list("slug", flat=True):
        crawl.page("gpu", f"/gpus/{slug}/")
    for source in Source.objects.order_by("slug"):
        crawl.page("source", f"/sources/{source.slug}/")
        crawl.page("ledger", f"/sources/{source.slug}/ledger/")
        keys = list(
            ComparisonGroup.objects.filter(publication__source=source)
            .order_by("id")
            .values_list("key", flat=True)
        )
        for key in spread(keys, groups_per_source):
            crawl.page("group", f"/groups/{key.removeprefix('sha256:')[:16]}/")
    levels = Run.objects.public().values_list("source__slug", "evidence").distinct()
    for source, evidence in levels.order_by("source__slug", "evidence"):
        ids = list(
            Run.objects.public()
            .filter(source__slug=source, evidence=evidence)
            .order_by("id")
            .values_list("public_id", flat=True)
        )
        for public_id in spread(ids, runs_per_level):
            crawl.page(f"run ({source}, {evidence})", f"/runs/{public_id}/")
            crawl.page("manifest", f"/runs/{public_id}.json")
            crawl.page("history", f"/runs/{public_id}/history/")
    return crawl


def per_kind(crawl: Crawl) -> dict[str, int]:
    kinds: dict[str, int] = defaultdict(int)
    for kind, n in crawl.pages.items():
        kinds[kind.split(" (")[0]] += n
    return dict(kinds)


def main() -> None:
    from django.test import Client
    from django.test.utils import override_settings

    host = "kernelindex.example.org"
    with override_settings(
        ALLOWED_HOSTS=[host],
        SITE_ROOT=f"https://{host}",
        SITE_ROOT_CONFIGURED=True,
        DEBUG=False,
        PAGE_CACHE_SECONDS=0,
        SECURE_SSL_REDIRECT=False,
    ):
        crawl = crawl_site(Crawl(Client(raise_request_exception=False), host))
    print(crawl.report())
    print(json.dumps(per_kind(crawl), indent=1))
    for item in (crawl.server_errors + crawl.broken_links + crawl.foreign_links)[:40]:
        print(item)

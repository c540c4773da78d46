"""Atom feed of newly imported runs."""

from __future__ import annotations

from django.contrib.syndication.views import Feed
from django.http import HttpRequest, HttpResponse
from django.utils.feedgenerator import Atom1Feed

from kilib.origin import absolute
from runs.models import Run
from runs.pages.units import scale
from runs.read import catalogue
from runs.read.freshness import DATA, cached


class LatestRunsFeed(Feed):
    feed_type = Atom1Feed
    title = "KernelIndex: newly imported runs"
    subtitle = "GPU-kernel benchmark runs as they are imported, newest first."

    # Every link in the feed is absolute from the site's one origin (kilib/origin.py).
    def link(self) -> str:
        return absolute("/runs/?ordering=-imported")

    def item_link(self, item: Run) -> str:
        return absolute(item.get_absolute_url())

    def feed_url(self) -> str:
        return absolute("/feeds/runs.atom")

    def items(self):
        runs = list(Run.objects.public().for_feed()[:50])
        catalogue.attach(runs)
        return runs

    def item_title(self, item: Run) -> str:
        return (
            f"{item.benchmark.title} · {item.implementation.display_name} · {item.timed_pass}: "
            f"{scale(item.median, item.unit)} median on {item.environment.gpu.upstream_name}"
        )

    def item_description(self, item: Run) -> str:
        return (
            f"Run {item.public_id} from {item.source.name}, observed "
            f"{item.observed_at:%Y-%m-%d}, rank {item.rank or '—'} in its comparison group. "
            f"Digest {item.digest}."
        )

    def item_guid(self, item: Run) -> str:
        return f"{absolute(item.get_absolute_url())}#r{item.revision}"

    item_guid_is_permalink = False

    def item_pubdate(self, item: Run):
        return item.created_at

    def item_updateddate(self, item: Run):
        return item.created_at

    def item_author_name(self, item: Run) -> str:
        return item.source.name


def latest_runs(request: HttpRequest) -> HttpResponse:
    """The feed reads the run data only and is the same for every reader (its links are from
    the site's one origin): the document is kept under the data version, so a reader after
    the first pays a lookup, not fifty items through the feed generator."""
    content, content_type = cached("feed:latest-runs", [DATA], lambda: _document(request))
    return HttpResponse(content, content_type=content_type)


def _document(request: HttpRequest) -> tuple[bytes, str]:
    response = LatestRunsFeed()(request)
    return response.content, response["Content-Type"]

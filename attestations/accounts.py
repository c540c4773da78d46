"""allauth's hooks: account emails name the site and its one origin, never the Host header a
request came in with (without django.contrib.sites allauth takes both from the request)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from allauth.account.adapter import DefaultAccountAdapter
from django.conf import settings

from kilib.origin import site_root


@dataclass(frozen=True)
class _Site:
    name: str
    domain: str


class AccountAdapter(DefaultAccountAdapter):
    def send_mail(self, template_prefix: str, email: str, context: dict) -> None:
        site = _Site(settings.SITE_NAME, urlsplit(site_root()).netloc)
        super().send_mail(template_prefix, email, {"current_site": site, **context})

"""Deploy checks of the project's own settings (`manage.py check --deploy`)."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Tags, Warning, register


@register(Tags.security, deploy=True)
def site_root_configured(app_configs, **kwargs):
    if settings.DEBUG or settings.SITE_ROOT_CONFIGURED:
        return []
    return [
        Warning(
            "SITE_ROOT is not set: citations, the feed and emails would link to "
            f"{settings.SITE_ROOT}.",
            hint="Set SITE_ROOT to the public origin, e.g. https://kernelindex.example.org.",
            id="kernelindex.W001",
        )
    ]

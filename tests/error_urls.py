"""The site's URLs plus views that fail on purpose, for the error page tests."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.urls import path

from kernelindex.urls import handler404, handler500  # noqa: F401
from kernelindex.urls import urlpatterns as site_urls


def _fails(request):
    raise RuntimeError("a deliberate failure")


def _forbidden(request):
    raise PermissionDenied


urlpatterns = [path("fails/", _fails), path("forbidden/", _forbidden), *site_urls]

from __future__ import annotations

from django.apps import AppConfig


class ClaimsConfig(AppConfig):
    name = "claims"
    verbose_name = "Judged claims"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from claims import signals  # noqa: F401

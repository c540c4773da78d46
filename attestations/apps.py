from django.apps import AppConfig


class AttestationsConfig(AppConfig):
    name = "attestations"
    verbose_name = "Community"
    default_auto_field = "django.db.models.BigAutoField"

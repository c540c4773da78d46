from django.apps import AppConfig
from django.db.models.signals import post_save


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs"

    def ready(self) -> None:
        from runs.freshness import data_changed
        from runs.models import ImportRecord

        # A finished import changes what public pages show: a new fingerprint retires every
        # cached page and ETag at once. (A cache bump, not work: nothing is enqueued here.)
        post_save.connect(
            lambda **kwargs: data_changed(), sender=ImportRecord, weak=False,
            dispatch_uid="runs.import_changes_fingerprint",
        )

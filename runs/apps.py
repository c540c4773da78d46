from django.apps import AppConfig
from django.db.models.signals import post_delete, post_migrate, post_save


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs"
    # Read by runs.read.freshness: a write to any other table of this app moves the data
    # version that public pages are cached under; the version's own row does not.
    public_data = True
    private_models = ("dataversion",)

    def ready(self) -> None:
        from runs.read import freshness  # models are loaded only once the registry is ready

        # A saved import, evidence change or moderated attestation changes what public pages
        # show: a new data fingerprint retires every cached page and ETag at once. This is a
        # cache bump, not work: nothing is enqueued here.
        post_save.connect(freshness.on_saved, weak=False, dispatch_uid="runs.public_data_saved")
        post_delete.connect(freshness.on_saved, weak=False, dispatch_uid="runs.public_data_deleted")
        # Writes that send no signal (update(), bulk_create, COPY, raw SQL) move the data
        # version through database triggers, installed on every public table after migrate.
        post_migrate.connect(
            freshness.triggers_install, sender=self, dispatch_uid="runs.data_version_triggers"
        )

        from django.urls import register_converter

        from runs.pages.converters import UpstreamNameConverter

        # `<upstream:…>` in runs/urls.py and runs/api/urls.py: upstream names as path segments.
        register_converter(UpstreamNameConverter, "upstream")

        # A controlled rerun's evidence event re-judges its group's claims once committed.
        from runs.claims import signals  # noqa: F401

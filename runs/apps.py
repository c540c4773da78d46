from django.apps import AppConfig
from django.db.models.signals import post_migrate


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs"
    # Read by runs.read.freshness: a write to any other table of this app moves the "data"
    # version that public pages are cached under; the versions' own rows do not, nor the
    # tallies (runs/read/tallies.py), which only ever move with a write to the runs or groups.
    public_data = True
    private_models = ("version", "tally")

    def ready(self) -> None:
        from runs.read import freshness  # models are loaded only once the registry is ready

        # Every write to a public table, whatever API made it, moves the versions of what it
        # wrote through database triggers, installed on every public table after migrate.
        post_migrate.connect(
            freshness.triggers_install, sender=self, dispatch_uid="runs.data_version_triggers"
        )
        from runs.read import tallies

        # The home page's counts, kept by triggers in the transaction of each write.
        post_migrate.connect(tallies.install, sender=self, dispatch_uid="runs.tally_triggers")

        from django.urls import register_converter

        from runs.pages.converters import UpstreamNameConverter

        # `<upstream:…>` in runs/urls.py and runs/api/urls.py: upstream names as path segments.
        register_converter(UpstreamNameConverter, "upstream")

        # A controlled rerun's evidence event re-judges its group's claims once committed.
        from runs.claims import signals  # noqa: F401

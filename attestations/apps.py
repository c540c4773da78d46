from django.apps import AppConfig


class AttestationsConfig(AppConfig):
    name = "attestations"
    verbose_name = "Community"
    default_auto_field = "django.db.models.BigAutoField"
    # Read by runs.read.freshness. Attestations appear on run pages, so a write moves the
    # version of the run it names (run:<id>, else activity:unscoped) and activity:attestations,
    # never the run data's; tokens change on every API call (their last use) and watches and
    # notices are private to their user, so moving a version for them would only empty the cache.
    public_data = True
    private_models = ("apitoken", "watch", "notice")

    def ready(self) -> None:
        from attestations import panels, services, staffmfa
        from attestations.watching import panels as watching_panels
        from attestations.watching import receivers
        from runs.extensions import run_extensions
        from runs.signals import change_reviewed

        staffmfa.connect_signals()
        run_extensions.register_panel(panels.PANEL)
        run_extensions.register_panel(panels.MEASURED_PANEL)
        run_extensions.register_panel(watching_panels.PANEL)
        receivers.connect()
        change_reviewed.connect(services.on_change_reviewed, dispatch_uid="trail-change-review")
        run_extensions.register_panel(panels.BENCHMARK_PANEL)
        run_extensions.register_site_fragment("header", "attestations/_account_nav.html")

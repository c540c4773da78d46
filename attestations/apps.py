from django.apps import AppConfig


class AttestationsConfig(AppConfig):
    name = "attestations"
    verbose_name = "Community"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import kernelindex.checks  # noqa: F401 - registers the project's deploy checks
        from attestations import panels, staffmfa
        from attestations.watching import panels as watching_panels
        from attestations.watching import receivers
        from runs.extensions import run_extensions

        staffmfa.connect_signals()
        run_extensions.register_panel(panels.PANEL)
        run_extensions.register_panel(panels.MEASURED_PANEL)
        run_extensions.register_panel(watching_panels.PANEL)
        receivers.connect()
        run_extensions.register_panel(panels.BENCHMARK_PANEL)

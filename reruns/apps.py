from django.apps import AppConfig


class RerunsConfig(AppConfig):
    name = "reruns"
    verbose_name = "Controlled reruns"
    # Jobs and results appear on run pages: a write moves the version of the run it names
    # (run:<id>, else activity:unscoped) and activity:reruns, never the run data's
    # (runs.read.freshness).
    public_data = True

    def ready(self) -> None:
        from reruns import admin, demo, panels
        from runs.extensions import run_extensions

        run_extensions.register_panel(panels.PANEL)
        run_extensions.register_panel(panels.REPRODUCE_PANEL)
        run_extensions.register_admin_action(admin.order_controlled_rerun)
        run_extensions.register_demo_loader(demo.LOADER)

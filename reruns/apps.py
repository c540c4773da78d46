from django.apps import AppConfig


class RerunsConfig(AppConfig):
    name = "reruns"
    verbose_name = "Controlled reruns"

    def ready(self) -> None:
        from reruns import admin, panels
        from runs.extensions import run_extensions

        run_extensions.register_panel(panels.PANEL)
        run_extensions.register_panel(panels.REPRODUCE_PANEL)
        run_extensions.register_admin_action(admin.order_controlled_rerun)

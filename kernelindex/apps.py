from django.apps import AppConfig


class KernelIndexConfig(AppConfig):
    """The project itself, as an app: what belongs to the site as a whole rather than to one of
    its apps (the deploy checks of its settings)."""

    name = "kernelindex"
    verbose_name = "KernelIndex"

    def ready(self) -> None:
        from kernelindex import checks  # noqa: F401 - registers the project's deploy checks

from django.apps import AppConfig


class RerunsConfig(AppConfig):
    name = "reruns"
    verbose_name = "Controlled reruns"

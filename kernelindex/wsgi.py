import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
application = get_wsgi_application()


def _require_collected_static() -> None:
    """With DEBUG off pages link hashed static names from collectstatic's manifest; without it
    every HTML page would answer 500. Refuse to start instead, and say what to run."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    if settings.DEBUG:
        return
    manifest = settings.STATIC_ROOT / "staticfiles.json"
    if not manifest.exists():
        raise ImproperlyConfigured(
            f"{manifest} is missing: run `manage.py collectstatic --noinput` before serving "
            "with DEBUG=0 (README, Deploying)."
        )


_require_collected_static()

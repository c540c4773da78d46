"""The reruns app's demo data, loaded by `manage.py demo` through runs.extensions."""

from __future__ import annotations

from pathlib import Path

from django.core.management import call_command

from runs.extensions import DemoLoader


def load(data: Path) -> None:
    """Controlled reruns: the signed results kept under data/reruns/<batch>/, batch by batch.
    A folder whose jobs all wait in unrun/ (issued, none run yet) has nothing to load."""
    for batch in sorted(p for p in (data / "reruns").glob("*") if p.is_dir()):
        if any(batch.glob("jobs/*.json")):
            call_command("rerun", "load-demo", str(batch))


LOADER = DemoLoader(name="controlled-reruns", load=load)

"""The reruns app's demo data, loaded by `manage.py demo` through runs.extensions."""

from __future__ import annotations

from pathlib import Path

from django.core.management import call_command

from runs.extensions import DemoLoader


def load(data: Path) -> None:
    """Controlled reruns: the signed results kept under data/reruns/<batch>/, batch by batch."""
    for batch in sorted(p for p in (data / "reruns").glob("*") if p.is_dir()):
        call_command("rerun", "load-demo", str(batch))


LOADER = DemoLoader(name="controlled-reruns", load=load)

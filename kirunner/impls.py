"""Locating the implementations a job names: liger_kernel releases, transformers, torch.

Every import here is lazy. A missing package or a machine that cannot run the code
raises :class:`Unavailable`, which the runner turns into a clean "unavailable" result.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = [
    "LIGER_ROOT_ENV",
    "ImplInfo",
    "Unavailable",
    "dist_version",
    "load_liger",
    "load_transformers",
]

# A folder holding one pip --target folder per liger-kernel release, named by version
# (e.g. /tmp/liger/0.6.2/liger_kernel/...). Several releases cannot share one
# site-packages, and the job decides which one it wants.
LIGER_ROOT_ENV = "KIRUNNER_LIGER_ROOT"
# Development only: let liger run through Triton's CPU interpreter (TRITON_INTERPRET=1).
# Results made this way say so; their timings mean nothing.
LIGER_INTERPRET_ENV = "KIRUNNER_LIGER_INTERPRET"


class Unavailable(RuntimeError):
    """The requested implementation cannot run here (package missing, no CUDA, ...)."""


@dataclass
class ImplInfo:
    """What was asked for and what really ran; goes into the result's implementation."""

    package: str
    requested_revision: str | None
    used_revision: str | None
    module: str | None = None
    selection: str | None = None
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "package": self.package,
            "requestedRevision": self.requested_revision,
            "usedRevision": self.used_revision,
        }
        if self.module:
            out["module"] = self.module
        if self.selection:
            out["selection"] = self.selection
        if self.notes:
            out["notes"] = list(self.notes)
        return out


def dist_version(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def load_transformers(module: str) -> tuple[ModuleType, str | None]:
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # ImportError, or a transformers that breaks on this torch
        raise Unavailable(f"cannot import {module}: {type(exc).__name__}: {exc}") from exc
    import transformers

    return mod, getattr(transformers, "__version__", None) or dist_version("transformers")


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v)[:4])


def _installed_releases(root: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    if not root.is_dir():
        return out
    for child in root.iterdir():
        if child.is_dir() and (child / "liger_kernel").is_dir() and re.match(r"^\d", child.name):
            out[child.name] = child
    return out


def _module_file(site: Path, module: str) -> bool:
    rel = Path(*module.split("."))
    return (site / rel.with_suffix(".py")).is_file() or (site / rel / "__init__.py").is_file()


def _choose_release(
    releases: dict[str, Path], requested: str | None, module: str
) -> tuple[str, Path, str]:
    having = {v: p for v, p in releases.items() if _module_file(p, module)}
    if not having:
        raise Unavailable(
            f"no installed liger-kernel release has {module} "
            f"(installed: {', '.join(sorted(releases, key=_version_key)) or 'none'})"
        )
    if requested and requested in having:
        return requested, having[requested], "exact release"
    ordered = sorted(having, key=_version_key)
    if requested:
        req = _version_key(requested)
        why = (
            f"{requested} not installed"
            if requested not in releases
            else f"{requested} has no {module}"
        )
        later = [v for v in ordered if _version_key(v) > req]
        if later:
            # Upstream rows are stamped with the version string of the checkout that ran
            # them, which for a dev build is the last release; its code first shipped in
            # the next release, so that is the closest installable code.
            return later[0], having[later[0]], f"nearest later release ({why})"
        return ordered[-1], having[ordered[-1]], f"latest earlier release ({why})"
    return ordered[-1], having[ordered[-1]], "latest installed release (none requested)"


def _liger_can_run() -> str | None:
    """Why liger cannot run here, or None when it can."""
    import torch

    interpret = os.environ.get(LIGER_INTERPRET_ENV) == "1" and os.environ.get("TRITON_INTERPRET") == "1"
    if not torch.cuda.is_available() and not interpret:
        return "liger-kernel is Triton code and needs a CUDA GPU; torch.cuda.is_available() is False"
    try:
        importlib.import_module("triton")
    except Exception as exc:
        return f"liger-kernel needs triton, which cannot be imported: {type(exc).__name__}: {exc}"
    return None


def load_liger(module: str, requested: str | None, *, device_type: str) -> tuple[ModuleType, ImplInfo]:
    """Import ``module`` from the liger-kernel release closest to ``requested``."""
    if device_type != "cuda" and not (
        os.environ.get(LIGER_INTERPRET_ENV) == "1" and os.environ.get("TRITON_INTERPRET") == "1"
    ):
        raise Unavailable(
            "liger-kernel is Triton code and needs a CUDA GPU; this run is on the CPU"
        )
    reason = _liger_can_run()
    if reason:
        raise Unavailable(reason)

    info = ImplInfo(package="liger-kernel", requested_revision=requested, used_revision=None, module=module)
    root = os.environ.get(LIGER_ROOT_ENV)
    if root:
        releases = _installed_releases(Path(root))
        version, site, selection = _choose_release(releases, requested, module)
        if "liger_kernel" in sys.modules:
            loaded = getattr(sys.modules["liger_kernel"], "__file__", "") or ""
            if not loaded.startswith(str(site)):
                raise Unavailable(f"another liger_kernel is already imported from {loaded}")
        sys.path.insert(0, str(site))
        info.used_revision = version
        info.selection = selection
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise Unavailable(f"cannot import {module}: {exc}") from exc
    except Exception as exc:
        raise Unavailable(f"importing {module} failed: {type(exc).__name__}: {exc}") from exc

    # Trust the metadata of the package really imported over the folder name.
    pkg_dir = Path(importlib.import_module("liger_kernel").__file__ or "").parent
    found = None
    for dist in md.distributions(path=[str(pkg_dir.parent)]):
        if (dist.metadata.get("Name") or "").lower().replace("_", "-") == "liger-kernel":
            found = dist.version
            break
    info.used_revision = found or info.used_revision or dist_version("liger-kernel")
    if info.selection is None:
        info.selection = (
            "exact release" if requested and info.used_revision == requested else "installed package"
        )
    if os.environ.get("TRITON_INTERPRET") == "1":
        info.notes.append("ran under TRITON_INTERPRET=1 (Triton CPU interpreter): timings are meaningless")
    return mod, info

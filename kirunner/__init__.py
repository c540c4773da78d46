"""kirunner: re-measure one published GPU-kernel benchmark row.

Imports nothing beyond the standard library here; torch, transformers, triton and
liger_kernel are imported lazily by the modules that need them, so that the web app
(or a test) can import the package, and so that a missing optional package becomes an
"unavailable" result rather than an ImportError.
"""

from __future__ import annotations

from typing import Any

from .version import __version__

__all__ = ["__version__", "run_job"]


def run_job(job: dict[str, Any], **options: Any) -> dict[str, Any]:
    """Run one RerunJob document and return the RerunResult document (unsigned)."""
    from .runner import run_job as _run_job

    return _run_job(job, **options)

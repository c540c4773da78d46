"""kirunner must import without Django (and without torch until a job runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = r"""
import sys
import kirunner, kirunner.canonical, kirunner.sign, kirunner.workload, kirunner.impls
assert "torch" not in sys.modules, "plain import pulled in torch"
import kirunner.__main__, kirunner.runner, kirunner.kernels, kirunner.check, kirunner.harness
import kirunner.env, kirunner.protocol, kirunner.reference, kirunner.sanity
bad = sorted(m for m in sys.modules if m == "django" or m.startswith("django."))
assert not bad, bad
job = {"apiVersion": "kernelindex.dev/v1alpha1", "kind": "RerunJob",
       "job": {"id": "x", "nonce": "y"}, "run": {"publicId": "z"},
       "benchmark": "rms_norm", "pass": "forward", "metric": "latency", "provider": "huggingface",
       "workload": {"parameters": {"M": 8, "hidden": 16, "eps": 1e-6, "dtype": "fp32"}},
       "protocol": {"family": "liger_kernel_bench"}}
r = kirunner.run_job(job, force_cpu=True, rep=1.0)
assert r["payload"]["status"] == "ok", r["payload"]["error"]
bad = sorted(m for m in sys.modules if m == "django" or m.startswith("django."))
assert not bad, bad
print("clean")
"""


def test_kirunner_never_imports_django() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "clean" in out.stdout

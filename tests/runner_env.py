"""Fresh virtual environments for the runner, as a person installs it: nothing of the web app
inside, only what pip puts there.

The runner's dependencies (torch's CPU build, transformers, jsonschema, rfc8785) are installed
once into a folder of their own, which each fresh environment sees through a
.pth file, as `--system-site-packages` would show them: pip finds them satisfied and installs
the runner itself (its files, its metadata, the `kirunner` command) from what it was given.
Unpacking torch takes about a minute; the runner's own install then takes seconds."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The CPU build on this machine's disk, as the test extra pins it.
TORCH = "torch==2.13.0"


def clean_env(**extra: str) -> dict[str, str]:
    # Nothing of the web app's checkout or settings may leak into the installed runner.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELINDEX_", "DJANGO_"))}
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    env.update(extra)
    return env


@functools.cache
def runner_dependencies() -> Path:
    """A folder holding the runner's dependencies as kirunner/pyproject.toml lists them. It
    is kept between test runs on one machine, under a name made of what it holds (the
    requirements and the Python version), and used only once complete."""
    meta = tomllib.loads((REPO / "kirunner" / "pyproject.toml").read_text())["project"]
    wanted = [TORCH, *(d for d in meta["dependencies"] if not d.startswith("torch"))]
    name = hashlib.sha256(repr((wanted, sys.version_info[:2])).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"kirunner-deps-{name}"
    if (folder / ".complete").exists():
        return folder
    building = Path(tempfile.mkdtemp(prefix="kirunner-deps-"))
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--target", str(building), *wanted],
        env=clean_env(), capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (building / ".complete").write_text("\n".join(wanted) + "\n")
    try:
        building.rename(folder)
    except OSError:  # another test process finished first: use its folder
        shutil.rmtree(building, ignore_errors=True)
    return folder


def fresh_venv(path: Path) -> Path:
    """A new virtual environment at `path` (the page's `python3 -m venv`), its bin/ returned,
    which sees the runner's dependencies and nothing else."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, env=clean_env())
    with_deps(path)
    return path / "bin"


def with_deps(venv: Path) -> None:
    purelib = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    (Path(purelib) / "kirunner-deps.pth").write_text(f"{runner_dependencies()}\n")


def pip_install(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(bin_dir / "pip"), "install", *args],
        cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def shipped_copy(destination: Path, under: str = "") -> Path:
    """The files git tracks (under `under`), as they are in the working tree, copied to
    `destination`: what a fresh clone holds once the tree is committed. A file the checkout
    has but git does not (untracked, or ignored) is missing here, as it is for a newcomer."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", under or "."],
        cwd=REPO, check=True, capture_output=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = REPO / name
        if not source.is_file():  # deleted in the working tree, not yet committed
            continue
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return destination / under if under else destination


def run_page_commands(commands: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """A run page's "Reproduce on your GPU" commands in one shell, as written but for the
    `gpu` extra (triton and NVML are for a CUDA host; the wheel's metadata declares them), with
    the runner's dependencies visible to the new environment as --system-site-packages would
    show them, and `kirunner --help` run once installed (into help.txt)."""
    venv, install, download, run = commands
    assert install.startswith('pip install "kirunner[gpu] @ '), install
    script = "\n".join(
        [
            venv,
            "echo " + str(runner_dependencies()) + " > \"$(python -c 'import sysconfig; "
            'print(sysconfig.get_path("purelib"))\')/kirunner-deps.pth"',
            install.replace('"kirunner[gpu] @ ', '"kirunner @ '),
            download,
            "kirunner --help > help.txt",
            run,
        ]
    )
    done = subprocess.run(
        ["bash", "-euc", script], cwd=cwd, env=clean_env(),
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done

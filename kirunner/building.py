"""What every kernel spec is built from: the spec and implementation types and the small
tensor and provenance helpers the families share.

Its own module so that kirunner/kernels.py (the registry) imports kirunner/families/, and the
families import this, with no import leading back to the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .impls import ImplInfo, dist_version
from .workload import DTYPE_NAMES, Param, resolve_params

if TYPE_CHECKING:
    import torch

__all__ = [
    "Impl",
    "KernelSpec",
    "Tensors",
    "at_commit",
    "hf_info",
    "randn",
    "script_commit",
    "script_commit_in",
    "torch_dtype",
    "torch_info",
]

Tensors = dict[str, "torch.Tensor"]

# The upstream commit whose CI run published the row being re-measured (a CI job names it as
# its implementation revision). A script that changed between two releases is told apart by
# it where the release label cannot (rows between releases carry the last one's label).
_SCRIPT_COMMIT: ContextVar[str | None] = ContextVar("script_commit", default=None)


def script_commit() -> str | None:
    return _SCRIPT_COMMIT.get()


def script_commit_in(commits: tuple[str, ...]) -> bool:
    """Whether the job's commit is one of `commits` (seven or more characters of each)."""
    commit = script_commit() or ""
    return bool(commit) and any(c.startswith(commit[:7]) for c in commits)


@contextmanager
def at_commit(commit: str | None) -> Iterator[None]:
    token = _SCRIPT_COMMIT.set(commit)
    try:
        yield
    finally:
        _SCRIPT_COMMIT.reset(token)


@dataclass
class Impl:
    """A ready-to-call implementation of one kernel for one provider."""

    forward: Callable[[Tensors], tuple[torch.Tensor, ...]]
    info: ImplInfo
    module: Any = None  # nn.Module whose parameters also get gradient checks
    eps: float | None = None  # the epsilon the module really uses (reference must match)
    # What the script keeps on the device beside the provider it times (the other provider's
    # modules or heads): held here, it counts in peak memory as it does upstream.
    other_head: Any = None


@dataclass(frozen=True)
class KernelSpec:
    name: str
    script: str
    providers: tuple[str, ...]
    upstream_rep: int  # the rep= each speed call of the upstream script passes to do_bench
    style: str  # timing/memory protocol, see protocol.py
    params: tuple[Param, ...]
    inputs: tuple[str, ...]  # differentiable inputs, in the order the outputs' grads are checked
    outputs: tuple[str, ...]
    derived: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    small_caps: Mapping[str, int] = field(default_factory=dict)
    memory_style: str | None = None  # the memory function's recipe, where it differs
    # The script's process ran matmuls on both threads (forward, autograd) before it measured
    # this kernel's memory, in cells of another kernel: their cuBLAS workspaces are in its peak.
    earlier_matmuls: bool = False

    def script_rep(self) -> int:
        """The rep= of the script at the job's commit (upstream_rep unless a family's script
        changed it)."""
        return self.upstream_rep

    def recipe(self, for_memory: bool) -> str:
        """The protocol style of the speed or the memory function (see protocol.py)."""
        return (self.memory_style or self.style) if for_memory else self.style

    def script_cache_block(self, wl: dict[str, Any], provider: str | None = None) -> int | None:
        """Bytes of the free blocks the script's allocator cache was full of when its memory
        cells ran, where that changes the peak: max_memory_allocated counts a block whole
        when what a tensor leaves of it is 1 MiB or less, so a tensor carved from a large
        cached block reads its own size, and one given a fresh segment of its size rounded
        to 2 MiB reads the segment. None: the runner measures from an emptied cache. The
        provider is given because one script's providers need not be alike in this."""
        return None

    def memory_inputs(self, wl: dict[str, Any], device: Any, gen: Any) -> Tensors | None:
        """The memory function's tensors where they differ from the speed function's."""
        return None

    # -- workload -------------------------------------------------------------------------
    def resolve(self, given: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        resolved = resolve_params(self.name, self.params, given, derived=self.derived)
        values = resolved.values
        self.validate(values)
        return values, resolved.unused

    def validate(self, wl: dict[str, Any]) -> None:
        return None

    def scale_down(self, wl: dict[str, Any]) -> dict[str, Any]:
        """Shrink sizes for a CPU run, keeping dtype and all divisibility the kernel needs."""
        small = dict(wl)
        for key, cap in self.small_caps.items():
            if isinstance(small.get(key), int):
                small[key] = min(small[key], cap)
        return small

    # -- tensors --------------------------------------------------------------------------
    def make_inputs(self, wl: dict[str, Any], device: Any, gen: Any) -> Tensors:
        raise NotImplementedError

    def views(self, leaves: Tensors) -> Tensors:
        """What the implementation is called with, made from the leaf tensors."""
        return dict(leaves)

    def build(self, wl: dict[str, Any], provider: str, device: Any, revision: str | None) -> Impl:
        raise NotImplementedError

    def reference(self, views: Tensors, params: Tensors, wl: dict[str, Any], impl: Impl) -> tuple:
        raise NotImplementedError


def torch_dtype(label: str) -> torch.dtype:
    import torch

    return getattr(torch, DTYPE_NAMES[label])


def randn(shape: tuple[int, ...], dtype: Any, device: Any, gen: Any) -> torch.Tensor:
    import torch

    return torch.randn(shape, dtype=dtype, device=device, generator=gen)


def torch_info(what: str, notes: list[str] | None = None) -> ImplInfo:
    v = dist_version("torch")
    import torch

    return ImplInfo(
        package="torch",
        requested_revision=None,
        used_revision=getattr(torch, "__version__", v),
        module=what,
        notes=notes or [],
    )


def hf_info(module: str, version: str | None, notes: list[str] | None = None) -> ImplInfo:
    return ImplInfo(
        package="transformers",
        requested_revision=None,
        used_revision=version,
        module=module,
        notes=notes or [],
    )

"""DyT (dynamic tanh): benchmark/scripts/benchmark_dyt.py at Liger-Kernel 02bac05.

Upstream's kernel names are `dyt_beta=False` and `dyt_beta=True`, one per `beta` setting.
x `[BT, hidden]` (BT 4096, bfloat16), dy = randn_like(x) drawn once. The modules are built as
the script builds them, `.to(device)` only, so their parameters stay float32:
- `liger`: `LigerDyT(hidden_size, beta)` (liger_kernel.transformers.dyt);
- `torch`: the test suite's `TorchDyT`, `gamma * tanh(x * alpha) + beta` (beta left out when
  False), written here with the same parameters and operation order (alpha `ones(1) * 0.5`,
  gamma ones, beta zeros);
- `torch_compile`: `torch.compile(TorchDyT(...))`, as it ran in the script's process (see
  :func:`upstream_compiled`): compiled at its first call (the check's) where the script's
  compile took effect, dynamo's eager fallback where it did not.
Forward `dyt(x)`; backward `y.backward(dy, retain_graph=True)`; full a forward and
`y.backward(dy)` *without* retain_graph (speed) or with it (memory); grad_to_none [x]; rep 500.
"""

from __future__ import annotations

import types
from dataclasses import dataclass

from ..building import Impl, KernelSpec, randn, script_commit_in, torch_dtype, torch_info
from ..impls import Unavailable, load_liger
from ..workload import Param, WorkloadError

# The script's torch_compile cells in the order its process meets them: beta False then True
# (the `for beta` loop), each sweeping hidden 1024..16384 (x_values), at BT 4096 in bf16.
SCRIPT_BT = 4096
SCRIPT_DTYPE = "bf16"
SCRIPT_ORDER = tuple((beta, 1024 * i) for beta in (False, True) for i in range(1, 17))

# CI commits of the published rows whose benchmark_dyt.py is the one refactored in c2f4c020
# (after the 0.7.0 release, so its rows still say 0.7.0): it builds only the provider's
# module, and times and measures every pass with utils.run_speed_benchmark /
# run_memory_benchmark: backward with dy = randn_like(y) drawn once, full with
# randn_like(y) drawn inside the timed call and retain_graph=True (style `random_dy`), the
# memory function reading the pass, and do_bench's rep 10 (run_speed_benchmark's default).
# y is float32 there (bf16 x times the float32 parameters), so dy is too. Of the publications
# in data/liger-ci only ab7fe2a is.
REFACTORED_AT = ("ab7fe2a",)


def refactored_script() -> bool:
    return script_commit_in(REFACTORED_AT)


def recompile_limit() -> int:
    """dynamo's per-code-object limit of compiled entries (8 in torch 2.x)."""
    import torch._dynamo

    cfg = torch._dynamo.config
    return int(getattr(cfg, "recompile_limit", None) or getattr(cfg, "cache_size_limit", 8))


def upstream_compiled(beta: bool, hidden: int, bt: int, dtype: str, limit: int) -> bool | None:
    """Whether torch.compile took effect for this cell in benchmark_dyt.py's process.

    The script builds `torch.compile(TorchDyT(hidden))` for every cell, but every one of them
    runs the same code object (TorchDyT.forward), whose guards fail on a new hidden size (the
    parameters' shapes are static) or beta. dynamo compiles a code object at most
    `recompile_limit` times (8); at the next miss it falls back to eager for that code object
    for the rest of the process, keeping the entries it has. So only the first 8 cells the
    script meets, beta=False at hidden 1024..8192, ran compiled (in every pass: the later
    passes find their entries); beta=False at 9216..16384 and every beta=True cell ran eager.
    Liger's published H200 rows at 02bac05 and the script run on an H100
    (bench/fidelity/) show exactly that. None for a cell the script does not run."""
    if bt != SCRIPT_BT or dtype != SCRIPT_DTYPE or (beta, hidden) not in SCRIPT_ORDER:
        return None
    return SCRIPT_ORDER.index((beta, hidden)) < limit


def torch_dyt(hidden: int, beta: bool):
    """The upstream test suite's TorchDyT (test/transformers/test_dyt.py at 02bac05).

    Each call gives the class a forward with a code object of its own: dynamo keys its
    compiled entries (and its recompile limit) by code object, so a job's compile state is
    then its own, not what earlier jobs of a batch left on a shared one."""
    import torch

    class TorchDyT(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.alpha = torch.nn.Parameter(torch.ones(1) * 0.5)
            self.gamma = torch.nn.Parameter(torch.ones(hidden))
            self.beta = torch.nn.Parameter(torch.zeros(hidden)) if beta else None

        def forward(self, x):
            if self.beta is None:
                return self.gamma * torch.tanh(x * self.alpha)
            return self.gamma * torch.tanh(x * self.alpha) + self.beta

    fwd = TorchDyT.forward
    TorchDyT.forward = types.FunctionType(
        fwd.__code__.replace(), fwd.__globals__, fwd.__name__, fwd.__defaults__, fwd.__closure__
    )
    return TorchDyT()


def fall_back_to_eager(compiled, sample) -> None:
    """Put dynamo in the state a script's process reached: the recompile limit hit for the
    compiled frame, so it runs eager from now on (dynamo's RUN_ONLY for that code object).
    One call with the limit at 0 does it, on a small `sample` input, without a graph."""
    import torch

    with torch._dynamo.config.patch(recompile_limit=0), torch.no_grad():
        compiled(sample)


def reference_dyt(x, alpha, gamma, beta):
    import torch

    y = gamma * torch.tanh(x.to(torch.float64) * alpha)
    return y + beta if beta is not None else y


@dataclass(frozen=True)
class DytSpec(KernelSpec):
    beta: bool = False

    def validate(self, wl):
        if wl["beta"] != self.beta:
            raise WorkloadError(f"{self.name} has beta={self.beta}, the job says beta={wl['beta']}")

    def recipe(self, for_memory):
        return "random_dy" if refactored_script() else super().recipe(for_memory)

    def script_rep(self):
        """The refactored script times through utils.run_speed_benchmark, whose rep is 10."""
        return 10 if refactored_script() else self.upstream_rep

    def make_inputs(self, wl, device, gen):
        return {"x": randn((wl["bt"], wl["hidden"]), torch_dtype(wl["dtype"]), device, gen)}

    def build(self, wl, provider, device, revision):
        """The script builds all three providers' modules for every cell (torch, the one it
        compiles, liger, in that order) and calls one; so does this, and the other two stay
        resident (their parameters are in the script's peak: 2 x 4 bytes x hidden, twice
        that with beta). On a host without liger the liger companion is left out. The
        refactored script (REFACTORED_AT) builds only the provider's module; so does this."""
        import torch

        device_type = torch.device(device).type
        hidden = wl["hidden"]
        alone = refactored_script()
        torch_module = torch_dyt(hidden, self.beta).to(device)
        compiled_module = torch_dyt(hidden, self.beta).to(device)
        liger_module, liger_info, liger_missing = None, None, None
        if alone and provider != "liger":
            liger_missing = "the script at this commit builds only the provider's module"
        try:
            mod, liger_info = load_liger(
                "liger_kernel.transformers.dyt", revision, device_type=device_type
            )
            if provider == "liger" or not alone:
                liger_module = mod.LigerDyT(hidden_size=hidden, beta=self.beta).to(device)
        except Unavailable as exc:
            if provider == "liger":
                raise
            liger_missing = str(exc)
        what = "TorchDyT (Liger-Kernel test/transformers/test_dyt.py at 02bac05)"
        notes: list[str] = []
        if provider == "liger":
            module = call = liger_module
            info = liger_info
        elif provider == "torch":
            module = call = torch_module
            info = torch_info(what, notes)
        else:
            module = compiled_module
            call, notes = self._compiled_as_in_the_script(module, wl, device)
            info = torch_info("torch.compile of " + what, notes)
        if liger_missing and not alone:
            info.notes.append(
                f"the script's LigerDyT companion module was not built: {liger_missing}"
            )
        resident = (torch_module, compiled_module, liger_module)
        if alone:  # the provider's module only
            resident = (module,)
            info.notes.append("benchmark_dyt.py as refactored in c2f4c020 (style random_dy)")
        return Impl(lambda v, _resident=resident: (call(v["x"]),), info, module=module)

    def _compiled_as_in_the_script(self, module, wl, device):
        """torch.compile(module), put in dynamo's eager fallback where the script's process had
        hit the recompile limit for this cell (upstream_compiled); and the notes saying which."""
        import torch

        call, hidden = torch.compile(module), wl["hidden"]
        limit = recompile_limit()
        took = upstream_compiled(self.beta, hidden, wl["bt"], wl["dtype"], limit)
        if took is False:
            fall_back_to_eager(call, torch.zeros(1, hidden, device=device))
            return call, [
                "torch.compile did not take effect for this cell in the script's "
                f"process (dynamo's recompile limit, {limit}, was reached by the first "
                f"{limit} cells it met: beta=False, hidden 1024-{1024 * limit}); it "
                "ran eager there, and runs eager here through the same fallback"
            ]
        if took:
            return call, [
                "compiled, as in the script's process (one of the first "
                f"{limit} cells it met, within dynamo's recompile limit)"
            ]
        return call, ["a cell the script does not run: compiled at its first call"]

    def reference(self, views, params, wl, impl):
        return (reference_dyt(views["x"], params["alpha"], params["gamma"], params.get("beta")),)


def _spec(beta: bool) -> DytSpec:
    return DytSpec(
        name=f"dyt_beta={beta}",
        script="benchmark/scripts/benchmark_dyt.py",
        providers=("liger", "torch", "torch_compile"),
        upstream_rep=500,
        style="fixed_dy_release",
        params=(
            Param("bt", ("BT",), help="rows of the (BT, hidden) input"),
            Param("hidden", ("hidden_size",)),
            Param("beta", kind="bool"),
            Param("dtype", kind="dtype"),
        ),
        inputs=("x",),
        outputs=("y",),
        small_caps={"bt": 32, "hidden": 256},
        beta=beta,
    )


SPECS = (_spec(False), _spec(True))

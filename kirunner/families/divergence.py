"""jsd, kl_div, tvd: benchmark/scripts/benchmark_{jsd,kl_div,tvd}.py at Liger-Kernel 02bac05.

The three scripts share one recipe. The sweep is over V (vocab, 4096 to 131072); the fixed
configs are jsd B 4 T 2048, kl_div B 8 T 512, tvd B 8 T 2048; no dtype is set, so float32.
Inputs `[B*T, V]`, drawn in this order:
- jsd: `_input = randn(BT, V, requires_grad=True).log_softmax(-1)`, `target = randn(BT, V)
  .log_softmax(-1)`;
- kl_div: `_input` as jsd's, `target = randn(BT, V).softmax(-1)`;
- tvd: `_input = randn(BT, V, requires_grad=True).softmax(-1)`, `target` a softmax too.
`_input` is the (log_)softmax of the leaf, so every backward also runs that op's backward into
the leaf; the runner builds the same graph (the leaf is `x`, the benchmarked tensor its view).
Providers, built with no arguments beyond the reduction:
- jsd: `liger` `LigerJSD()` (beta 0.5, ignore_index -100); `torch` the script's `TorchJSD`
  (re-implemented below with its operation order; result cast to float32);
- kl_div: `liger` `LigerKLDIVLoss(reduction="batchmean")`; `torch`
  `nn.KLDivLoss(reduction="batchmean")`;
- tvd: `liger` `LigerTVDLoss(reduction="batchmean")`; `torch` the script's `TorchTVDLoss`
  (batchmean: `sum(|p - q| / 2) / BT`).
Speed (rep 100): forward `loss(_input, target)` with no grad_to_none; backward
`y.backward(retain_graph=True)` on one forward with grad_to_none [_input] (a non-leaf, so the
leaf's gradient accumulates, as upstream); full a forward and `y.backward(retain_graph=True)`
with no grad_to_none (style `scalar_loss_retain`).
Memory: upstream runs only full; its bench_memory_* never reads the pass and measures a
forward and `y.backward(retain_graph=True)` (memory style `scalar_loss_retain_full`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..building import Impl, KernelSpec, randn, torch_dtype, torch_info
from ..check import SignAtTies
from ..impls import load_liger
from ..workload import Param

JSD_BETA = 0.5  # LigerJSD's and TorchJSD's default, which the script keeps


def torch_jsd(dtype=None):
    """benchmark_jsd.py's TorchJSD (beta 0.5, no labels), same operations in the same order;
    the loss is cast to `dtype` (float32 unless given, as the script's default)."""
    import torch

    class TorchJSD(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.kl = torch.nn.KLDivLoss(reduction="none", log_target=True)
            self.beta = JSD_BETA
            self.dtype = torch.float if dtype is None else dtype

        def forward(self, log_q, log_p):
            log_p, log_q = log_p.to(torch.float), log_q.to(torch.float)
            log_p, log_q = log_p.view(-1, log_p.size(-1)), log_q.view(-1, log_q.size(-1))
            m = torch.lerp(torch.exp(log_q), torch.exp(log_p), self.beta)
            loss = self.beta * self.kl(torch.log(m), log_p).sum(dim=-1) + (1 - self.beta) * self.kl(
                torch.log(m), log_q
            ).sum(dim=-1)
            loss = (loss / log_q.shape[0]).sum()
            return loss.to(self.dtype)

    return TorchJSD()


def torch_tvd():
    """benchmark_tvd.py's TorchTVDLoss with reduction batchmean."""
    import torch

    class TorchTVDLoss(torch.nn.Module):
        def forward(self, p, q):
            tvd = torch.abs(p - q) / 2.0
            return torch.sum(tvd) / p.size(0)

    return TorchTVDLoss()


def reference_jsd(log_q, log_p, beta: float = JSD_BETA):
    """float64 generalised JSD, mean over rows: beta KL(P||M) + (1-beta) KL(Q||M)."""
    import torch

    log_q, log_p = log_q.to(torch.float64), log_p.to(torch.float64)
    p, q = log_p.exp(), log_q.exp()
    log_m = (beta * p + (1 - beta) * q).log()
    rows = beta * (p * (log_p - log_m)).sum(-1) + (1 - beta) * (q * (log_q - log_m)).sum(-1)
    return rows.sum() / log_q.shape[0]


def reference_kl_div(log_q, p):
    """float64 KL(P||Q) with Q given as log-probabilities, batchmean."""
    import torch

    log_q, p = log_q.to(torch.float64), p.to(torch.float64)
    return (torch.xlogy(p, p) - p * log_q).sum() / log_q.shape[0]


def reference_tvd(p, q):
    """float64 total variation distance, batchmean."""
    import torch

    p, q = p.to(torch.float64), q.to(torch.float64)
    return (p - q).abs().sum() / 2 / p.shape[0]


# kernel -> (input transform, target transform, liger module, liger class, reference)
_RECIPES = {
    "jsd": ("log_softmax", "log_softmax", "jsd", "LigerJSD", reference_jsd),
    "kl_div": ("log_softmax", "softmax", "kl_div", "LigerKLDIVLoss", reference_kl_div),
    "tvd": ("softmax", "softmax", "tvd", "LigerTVDLoss", reference_tvd),
}


@dataclass(frozen=True)
class DivergenceSpec(KernelSpec):
    def _recipe(self):
        return _RECIPES[self.name]

    def make_inputs(self, wl, device, gen):
        shape = (wl["batch"] * wl["seq"], wl["vocab"])
        dtype = torch_dtype(wl["dtype"])
        x = randn(shape, dtype, device, gen)
        # Only the transformed target is kept, as upstream keeps it (memory rows count it).
        target = getattr(randn(shape, dtype, device, gen), self._recipe()[1])(dim=-1)
        return {"x": x, "target": target}

    def views(self, leaves):
        # The benchmarked `_input` is the (log_)softmax of the leaf x, made once per case.
        return {"x": getattr(leaves["x"], self._recipe()[0])(dim=-1), "target": leaves["target"]}

    def build(self, wl, provider, device, revision):
        import torch

        _, _, module_name, class_name, _ = self._recipe()
        if provider == "liger":
            mod, info = load_liger(
                f"liger_kernel.transformers.{module_name}",
                revision,
                device_type=torch.device(device).type,
            )
            cls = getattr(mod, class_name)
            loss = cls() if self.name == "jsd" else cls(reduction="batchmean")
        elif self.name == "kl_div":
            loss = torch.nn.KLDivLoss(reduction="batchmean")
            info = torch_info('torch.nn.KLDivLoss(reduction="batchmean")')
        else:
            loss = torch_jsd() if self.name == "jsd" else torch_tvd()
            script = f"benchmark_{self.name}.py"
            what = "TorchJSD" if self.name == "jsd" else "TorchTVDLoss(reduction='batchmean')"
            info = torch_info(f"{what} as defined in Liger-Kernel {script} at 02bac05")
        return Impl(lambda v: (loss(v["x"], v["target"]),), info)

    def reference(self, views, params, wl, impl):
        return (self._recipe()[4](views["x"], views["target"]),)

    def check_rules(self, wl):
        # tvd's gradient with respect to p is 0.5 * sign(p - q) / rows (torch's abs gives 0 at
        # an exact tie): where p and q agree to rounding, the float32 softmax p and the
        # reference's float64 one can order the other way round q, and the element is off by
        # the whole 1 / rows. Those elements, and only those, may miss the bound. The tie
        # width, 64 * eps * max(p, q): torch's float32 CPU softmax of randn rows is at most
        # 5.0 (V 4096) and 10.8 (V 65536) eps * p from float64's, growing with V through the
        # row sum; 64 leaves room for another summation order and still makes only ~1e-6 of
        # the elements ties (6.7e-6 and 3.9e-6 of randn rows at V 4096 and 65536).
        if self.name != "tvd":
            return {}
        return {"grad_x": SignAtTies(lambda v: (v["x"], v["target"]))}


def _spec(name: str) -> DivergenceSpec:
    return DivergenceSpec(
        name=name,
        script=f"benchmark/scripts/benchmark_{name}.py",
        providers=("liger", "torch"),
        upstream_rep=100,
        style="scalar_loss_retain",
        memory_style="scalar_loss_retain_full",
        params=(
            Param("batch", ("B", "bsz", "batch_size")),
            Param("seq", ("T", "seq_len")),
            Param("vocab", ("V", "vocab_size"), help="the swept x"),
            # Upstream never sets a dtype: torch.randn's default, float32.
            Param("dtype", kind="dtype", default="fp32", required=False),
        ),
        inputs=("x",),
        outputs=("loss",),
        derived={"bt": ("batch", "seq"), "BT": ("batch", "seq")},
        small_caps={"batch": 2, "seq": 8, "vocab": 256},
    )


SPECS = tuple(_spec(name) for name in _RECIPES)

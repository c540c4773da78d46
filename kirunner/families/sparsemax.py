"""sparsemax: benchmark/scripts/benchmark_sparsemax.py at Liger-Kernel 02bac05.

The sweep is over V (feature size, 1024 to 32768); the fixed config is B 4, T 512, dim -1,
float32. x `[B*T, V]`, dy = randn_like(x) drawn once. Providers, `.to(device)` only:
- `liger`: `LigerSparsemax(dim=dim)` (liger_kernel.transformers.sparsemax);
- `torch`: the script's `TorchSparsemax` (sort, cumsum, support, threshold tau, clamp),
  re-implemented below with the same operations in the same order.
Speed (rep 500): forward `sm(x)`; backward `y.backward(dy, retain_graph=True)` on one forward;
full a forward and that backward; grad_to_none [x] in all three (style `fixed_dy`).
Memory: upstream runs only full, and its bench_memory_sparsemax never reads the pass (memory
style `fixed_dy_full`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..building import Impl, KernelSpec, randn, torch_dtype, torch_info
from ..check import AtSupportEdge, SupportScaled
from ..impls import load_liger
from ..workload import Param, WorkloadError


def torch_sparsemax(dim: int):
    """benchmark_sparsemax.py's TorchSparsemax."""
    import torch

    def sparsemax(x):
        d = dim + x.dim() if dim < 0 else dim
        x_sorted, _ = torch.sort(x, dim=d, descending=True)
        cumsum = torch.cumsum(x_sorted, dim=d)
        size = x.size(d)
        rng = torch.arange(1, size + 1, device=x.device, dtype=x.dtype)
        shape = [1] * x.dim()
        shape[d] = size
        rng = rng.view(shape)
        support = (1 + rng * x_sorted) > cumsum
        k = support.sum(dim=d, keepdim=True).clamp(min=1)
        tau = ((x_sorted * support).sum(dim=d, keepdim=True) - 1) / k
        return torch.clamp(x - tau, min=0)

    class TorchSparsemax(torch.nn.Module):
        def forward(self, x):
            return sparsemax(x)

    return TorchSparsemax()


def _threshold(z):
    """tau over the last dimension of z: the support is the k largest elements with
    1 + k * z_(k) > z_(1) + ... + z_(k), and tau = (their sum - 1) / k."""
    import torch

    ordered = z.sort(dim=-1, descending=True).values
    k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype, device=z.device)
    in_support = (1 + k * ordered) > ordered.cumsum(dim=-1)
    size = in_support.sum(dim=-1, keepdim=True)
    return ((ordered * in_support).sum(dim=-1, keepdim=True) - 1) / size


def reference_sparsemax(x, dim: int):
    """float64 sparsemax (Martins & Astudillo 2016): max(x - tau, 0) with tau chosen so the
    result sums to 1; autograd through it gives the sparsemax Jacobian (tau's gradient is
    the mean over the support)."""
    import torch

    z = x.to(torch.float64).movedim(dim, -1)
    return (z - _threshold(z)).clamp_min(0).movedim(-1, dim)


def support_edges(x, dim: int, width: float):
    """True across every slice along `dim` that has an element within rounding of its
    threshold, |z - tau| <= width * (max|z| + 1): a float32 threshold there may take the
    element into the support or leave it out (check.AtSupportEdge)."""
    import torch

    with torch.no_grad():
        z = x.detach().to(torch.float64).movedim(dim, -1)
        near = (z - _threshold(z)).abs() <= width * (z.abs().amax(dim=-1, keepdim=True) + 1)
        return near.any(dim=-1, keepdim=True).expand_as(z).movedim(-1, dim)


@dataclass(frozen=True)
class SparsemaxSpec(KernelSpec):
    def validate(self, wl):
        if wl["dim"] not in (-2, -1, 0, 1):
            raise WorkloadError(f"sparsemax: dim {wl['dim']} is not a dimension of [B*T, V]")

    def make_inputs(self, wl, device, gen):
        shape = (wl["batch"] * wl["seq"], wl["V"])
        return {"x": randn(shape, torch_dtype(wl["dtype"]), device, gen)}

    def build(self, wl, provider, device, revision):
        import torch

        if provider == "liger":
            mod, info = load_liger(
                "liger_kernel.transformers.sparsemax",
                revision,
                device_type=torch.device(device).type,
            )
            module = mod.LigerSparsemax(dim=wl["dim"]).to(device)
        else:
            module = torch_sparsemax(wl["dim"]).to(device)
            info = torch_info(
                "TorchSparsemax as defined in Liger-Kernel benchmark_sparsemax.py at 02bac05"
            )
        return Impl(lambda v: (module(v["x"]),), info)

    def reference(self, views, params, wl, impl):
        return (reference_sparsemax(views["x"], wl["dim"]),)

    def check_rules(self, wl):
        # y is exactly zero off its support (at V 32768 most of it), so RMS(y) over the whole
        # tensor is far below the values y takes; a float32 threshold tau off by rounding
        # then moves every element by more than atol * RMS(y). Scaled over the support, the
        # bound is atol times y's typical nonzero value, and at ref's zeros it is absolute.
        # The gradient, dy minus its mean over the support, on the support: where an element
        # sits within rounding of tau, float32 may count it in the support and float64 not
        # (or the other way), and the whole row's gradient moves by that element's share of
        # the mean; the held h200-2026-12-03b repeat of the torch line at V 32768 missed the
        # plain bound 8,756 times so (data/reruns/README.md). Only such rows may miss.
        dim = wl["dim"]
        return {
            "y": SupportScaled(),
            "grad_x": AtSupportEdge(lambda v, width: support_edges(v["x"], dim, width)),
        }


SPECS = (
    SparsemaxSpec(
        name="sparsemax",
        script="benchmark/scripts/benchmark_sparsemax.py",
        providers=("liger", "torch"),
        upstream_rep=500,
        style="fixed_dy",
        memory_style="fixed_dy_full",
        params=(
            Param("batch", ("B", "bsz", "batch_size")),
            Param("seq", ("T", "seq_len")),
            Param("V", ("vocab", "feature_size"), help="the swept feature size"),
            Param("dim", kind="sint", default=-1, required=False),
            Param("dtype", kind="dtype"),
        ),
        inputs=("x",),
        outputs=("y",),
        derived={"bt": ("batch", "seq"), "BT": ("batch", "seq")},
        small_caps={"batch": 2, "seq": 8, "V": 128},
    ),
)

"""mhc_coeffs, mhc_pre, mhc_post_res: benchmark/scripts/benchmark_mhc.py at Liger-Kernel ab7fe2a.

One script, three kernel names (its `sub_kernel`). Config: B 4, HC 4, C 4096, tmax 20, rms_eps
1e-6, pre_eps 0, sinkhorn_eps 1e-6, post_mult 2; T the swept x (128..2048). Every cell draws x
`randn(B, T, HC, C)` bfloat16, phi `randn(HC*C, HC*HC + 2*HC)` bfloat16 * 0.02, b zeros(M)
float32 and three float32 alphas of 1.0, all requiring grad only for backward and full (the
forward runs on tensors without grad, so records no graph).
- coeffs: `liger_mhc_coeffs(x, phi, b, alpha_pre, alpha_post, alpha_res, **cfg)` against the
  upstream test suite's `mhc_coeffs_ref` (test/transformers/test_mhc.py, re-implemented here
  with the same operations in the same order); loss = sum of the three outputs' mean squares.
- pre: h_pre from `liger_mhc_coeffs` under no_grad (for both providers), then
  `liger_mhc_pre(x, h_pre)` against `(x.float() * h_pre.unsqueeze(-1)).sum(-2)`.
- post_res: h_post, h_res likewise, f_out `randn(B, T, C)` bfloat16, then
  `liger_mhc_post_res(x, f_out, h_post, h_res)` against `einsum("...oi,...ic->...oc", h_res,
  x.float()) + h_post.unsqueeze(-1) * f_out.float().unsqueeze(-2)`.
Speed (style `mhc_loss`, rep 100): forward with no grad_to_none; backward `loss.backward(
retain_graph=True)` on one forward; full a forward and `loss.backward()`; grad_to_none every
tensor that requires grad. Memory: full only (`_test_memory(full, _iter=10)`); the script
measures pre after the coeffs cells, whose torch matmuls left the cuBLAS workspaces of both
threads in the process (64 MiB on the H100, in every pre figure), so the runner makes them too.

One difference: the script computes pre's and post_res's coefficients from the very x it
times; the runner computes them when it builds the implementation, from an x of its own draw
(the same shape and distribution), so that the check's inputs and the timed inputs share them.
The coefficients' shapes, dtypes and value ranges are the script's; phi, b and the alphas stay
resident as in the script.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..building import Impl, KernelSpec, randn, torch_info
from ..impls import Unavailable, load_liger
from ..workload import Param, WorkloadError

FUNCTIONAL = "liger_kernel.transformers.functional"
TEST_REF = (
    "mhc_coeffs_ref of Liger-Kernel test/transformers/test_mhc.py (re-implemented in kirunner)"
)


def mhc_sinkhorn_ref(logits, *, tmax: int, eps: float):
    """The test suite's mhc_sinkhorn_ref: softmax, then alternating column and row sums."""
    import torch

    mat = torch.softmax(logits, dim=-1) + eps
    mat = mat / (mat.sum(dim=-2, keepdim=True) + eps)
    for _ in range(tmax - 1):
        mat = mat / (mat.sum(dim=-1, keepdim=True) + eps)
        mat = mat / (mat.sum(dim=-2, keepdim=True) + eps)
    return mat


def mhc_coeffs_ref(x, phi, b, alpha_pre, alpha_post, alpha_res, *, tmax, rms_eps, pre_eps,
                   sinkhorn_eps, post_mult, dtype=None):  # fmt: skip
    """The test suite's mhc_coeffs_ref (in float32, its `.float()`); `dtype` float64 gives the
    runner's reference with the same operations."""
    import torch

    dtype = dtype or torch.float32
    x_flat = x.contiguous().view(-1, x.shape[-2], x.shape[-1]).to(dtype)
    n, hc, c = x_flat.shape
    x_mat = x_flat.view(n, hc * c)
    invr = torch.rsqrt(x_mat.pow(2).mean(dim=-1, keepdim=True) + rms_eps)
    mix = (x_mat @ phi.to(dtype)) * invr
    pre_logits = mix[:, :hc] * alpha_pre + b[:hc]
    post_logits = mix[:, hc : 2 * hc] * alpha_post + b[hc : 2 * hc]
    res_logits = mix[:, 2 * hc :].view(n, hc, hc) * alpha_res + b[2 * hc :].view(hc, hc)
    h_pre = torch.sigmoid(pre_logits) + pre_eps
    h_post = torch.sigmoid(post_logits) * post_mult
    h_res = mhc_sinkhorn_ref(res_logits, tmax=tmax, eps=sinkhorn_eps)
    outer = x.shape[:-2]
    return h_pre.view(*outer, hc), h_post.view(*outer, hc), h_res.view(*outer, hc, hc)


def torch_pre(x, h_pre):
    return (x.float() * h_pre.unsqueeze(-1)).sum(dim=-2)


def torch_post_res(x, f_out, h_post, h_res):
    import torch

    return torch.einsum("...oi,...ic->...oc", h_res, x.float()) + h_post.unsqueeze(
        -1
    ) * f_out.float().unsqueeze(-2)


def _cfg(wl) -> dict:
    return {k: wl[k] for k in ("tmax", "rms_eps", "pre_eps", "sinkhorn_eps", "post_mult")}


def _mixing(wl, device, gen=None):
    """phi, b and the three alphas as the script draws them (phi before b)."""
    import torch

    k, m = wl["HC"] * wl["C"], wl["HC"] * wl["HC"] + 2 * wl["HC"]
    phi = randn((k, m), torch.bfloat16, device, gen) * 0.02
    b = torch.zeros(m, device=device, dtype=torch.float32)
    alphas = [torch.tensor(1.0, device=device, dtype=torch.float32) for _ in range(3)]
    return [phi, b, *alphas]


@dataclass(frozen=True)
class MhcSpec(KernelSpec):
    sub_kernel: str = ""

    def validate(self, wl):
        if wl["sub_kernel"] != self.sub_kernel:
            raise WorkloadError(
                f"{self.name} has sub_kernel={self.sub_kernel}, the job says {wl['sub_kernel']}"
            )

    def scale_down(self, wl):
        return {**wl, "B": 2, "seq": min(wl["seq"], 16), "C": min(wl["C"], 64)}

    def make_inputs(self, wl, device, gen):
        import torch

        x = randn((wl["B"], wl["seq"], wl["HC"], wl["C"]), torch.bfloat16, device, gen)
        if self.sub_kernel == "coeffs":
            names = ("phi", "b", "alpha_pre", "alpha_post", "alpha_res")
            return {"x": x, **dict(zip(names, _mixing(wl, device, gen), strict=True))}
        if self.sub_kernel == "post_res":
            return {
                "x": x,
                "f_out": randn((wl["B"], wl["seq"], wl["C"]), torch.bfloat16, device, gen),
            }
        return {"x": x}

    def _coefficients(self, wl, device, functional):
        """The script's no-grad coefficients for pre and post_res, from liger_mhc_coeffs (the
        torch reference's where liger cannot run: only the CPU tests), with phi, b and the
        alphas that stay resident."""
        import torch

        x = randn((wl["B"], wl["seq"], wl["HC"], wl["C"]), torch.bfloat16, device, None)
        mixing = _mixing(wl, device)
        coeffs = functional.liger_mhc_coeffs if functional is not None else mhc_coeffs_ref
        with torch.no_grad():
            h_pre, h_post, h_res = coeffs(x, *mixing, **_cfg(wl))
        del x
        holder = torch.nn.Module()
        if self.sub_kernel == "pre":
            holder.h_pre = torch.nn.Parameter(h_pre)
        else:
            holder.h_post, holder.h_res = torch.nn.Parameter(h_post), torch.nn.Parameter(h_res)
        holder.resident = mixing
        return holder

    def build(self, wl, provider, device, revision):
        import torch

        functional, missing = None, None
        try:
            functional, liger_info = load_liger(
                FUNCTIONAL, revision, device_type=torch.device(device).type
            )
        except Unavailable as exc:
            if provider == "liger":
                raise
            missing = str(exc)
        cfg = _cfg(wl)
        if self.sub_kernel == "coeffs":
            fn = functional.liger_mhc_coeffs if provider == "liger" else mhc_coeffs_ref
            names = ("x", "phi", "b", "alpha_pre", "alpha_post", "alpha_res")
            module = None

            def forward(v):
                return tuple(fn(*(v[n] for n in names), **cfg))
        else:
            module = self._coefficients(wl, device, functional)
            if self.sub_kernel == "pre":
                fn = functional.liger_mhc_pre if provider == "liger" else torch_pre

                def forward(v):
                    return (fn(v["x"], module.h_pre),)
            else:
                fn = functional.liger_mhc_post_res if provider == "liger" else torch_post_res

                def forward(v):
                    return (fn(v["x"], v["f_out"], module.h_post, module.h_res),)

        info = liger_info if provider == "liger" else torch_info(
            TEST_REF if self.sub_kernel == "coeffs"
            else f"the eager torch expression of Liger-Kernel benchmark_mhc.py ({self.sub_kernel})"
        )  # fmt: skip
        if missing and self.sub_kernel != "coeffs":
            info.notes.append(
                f"coefficients from the torch reference, not liger_mhc_coeffs: {missing}"
            )
        return Impl(forward, info, module=module)

    def reference(self, views, params, wl, impl):
        import torch

        if self.sub_kernel == "coeffs":
            args = (views[n] for n in ("x", "phi", "b", "alpha_pre", "alpha_post", "alpha_res"))
            return mhc_coeffs_ref(*args, **_cfg(wl), dtype=torch.float64)
        x = views["x"].to(torch.float64)
        if self.sub_kernel == "pre":
            return ((x * params["h_pre"].unsqueeze(-1)).sum(dim=-2),)
        f_out = views["f_out"].to(torch.float64)
        return (
            torch.einsum("...oi,...ic->...oc", params["h_res"], x)
            + params["h_post"].unsqueeze(-1) * f_out.unsqueeze(-2),
        )


_PARAMS = (
    Param("seq", ("T", "seq_len"), help="sequence length (the swept x)"),
    Param("B", ("batch",)),
    Param("HC", help="hyper-connection streams"),
    Param("C", help="channels per stream"),
    Param("tmax", help="Sinkhorn iterations"),
    Param("rms_eps", kind="float"),
    Param("pre_eps", kind="float"),
    Param("sinkhorn_eps", kind="float"),
    Param("post_mult", kind="float"),
    Param("sub_kernel", kind="str"),
    # x and phi are bfloat16 in the script whatever the config says (it names no dtype).
    Param("dtype", kind="dtype", default="bf16", required=False),
)
_INPUTS = {
    "coeffs": ("x", "phi", "b", "alpha_pre", "alpha_post", "alpha_res"),
    "pre": ("x",),
    "post_res": ("x", "f_out"),
}
_OUTPUTS = {"coeffs": ("h_pre", "h_post", "h_res"), "pre": ("x_in",), "post_res": ("x_out",)}

SPECS = tuple(
    MhcSpec(
        name=f"mhc_{sub}",
        script="benchmark/scripts/benchmark_mhc.py",
        providers=("liger", "torch"),
        upstream_rep=100,
        style="mhc_loss",
        memory_style="mhc_loss_full",
        params=_PARAMS,
        inputs=_INPUTS[sub],
        outputs=_OUTPUTS[sub],
        sub_kernel=sub,
        # pre runs no matmul, but the script measures it after the coeffs cells, whose torch
        # provider's matmuls left both threads' workspaces (64 MiB on the H100) in its peak.
        earlier_matmuls=sub == "pre",
    )
    for sub in ("coeffs", "pre", "post_res")
)

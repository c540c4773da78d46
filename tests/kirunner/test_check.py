"""The correctness check catches wrong kernels and is not fooled by in-place kernels."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import kirunner
from kirunner import kernels
from kirunner.check import TOLERANCES, run_check

from .jobs import make_job


def _wrap_build(monkeypatch: pytest.MonkeyPatch, spec_cls: type, wrap) -> None:
    """Replace the implementation the spec builds with wrap(original_forward)."""
    original = spec_cls.build

    def build(self, wl, provider, device, revision):
        impl = original(self, wl, provider, device, revision)
        return dataclasses.replace(impl, forward=wrap(impl.forward))

    monkeypatch.setattr(spec_cls, "build", build)


def _run(job: dict) -> dict:
    return kirunner.run_job(job, force_cpu=True, rep=5.0, seed=99)["payload"]


@pytest.mark.parametrize(
    "benchmark,spec_cls",
    [
        ("rms_norm", kernels.RmsNormSpec),
        ("rope", kernels.RopeSpec),
        ("llama4_rope", kernels.Llama4RopeSpec),
        ("swiglu", kernels.GatedMlpSpec),
        ("cross_entropy", kernels.CrossEntropySpec),
    ],
)
def test_wrong_output_fails_the_check(monkeypatch, benchmark, spec_cls) -> None:
    _wrap_build(monkeypatch, spec_cls, lambda fwd: lambda v: tuple(o * 1.25 for o in fwd(v)))
    p = _run(make_job(benchmark, pass_="forward"))
    assert p["correctness"]["passed"] is False
    assert p["status"] == "incorrect"
    assert not p["correctness"]["checks"][0]["passed"]
    # The timing is still taken and recorded (documented policy): the numbers are real.
    assert p["measurement"] is not None and len(p["measurement"]["samples"]) > 0
    assert p["error"] is None


def test_rope_with_swapped_rotation_direction_fails(monkeypatch) -> None:
    # A classic RoPE bug: rotating by -theta. Same magnitudes, wrong values.
    def wrap(fwd):
        def wrong(v):
            q_out, k_out = fwd({"q": v["q"], "k": v["k"]})
            return q_out.flip(-2), k_out.flip(-2)  # positions reversed

        return wrong

    _wrap_build(monkeypatch, kernels.RopeSpec, wrap)
    p = _run(make_job("rope", pass_="forward"))
    assert p["correctness"]["passed"] is False


class _ScaleGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g * 1.5


def test_wrong_gradient_fails_only_when_gradients_are_checked(monkeypatch) -> None:
    _wrap_build(
        monkeypatch,
        kernels.LayerNormSpec,
        lambda fwd: lambda v: tuple(_ScaleGrad.apply(o) for o in fwd(v)),
    )
    fwd_only = _run(make_job("layer_norm", pass_="forward"))
    assert fwd_only["correctness"]["passed"] is True
    full = _run(make_job("layer_norm", pass_="full"))
    assert full["correctness"]["passed"] is False
    failed = {c["name"] for c in full["correctness"]["checks"] if not c["passed"]}
    assert failed and all(name.startswith("grad_") for name in failed)
    assert "y" not in failed


def test_nan_output_fails(monkeypatch) -> None:
    _wrap_build(
        monkeypatch,
        kernels.RmsNormSpec,
        lambda fwd: (
            lambda v: tuple(
                o.masked_fill(
                    torch.zeros_like(o, dtype=torch.bool).index_fill(-1, torch.tensor([0]), True),
                    float("nan"),
                )
                for o in fwd(v)
            )
        ),
    )
    p = _run(make_job("rms_norm", pass_="forward"))
    assert p["correctness"]["passed"] is False
    assert "NaN" in p["correctness"]["checks"][0]["problem"]


def test_kernel_writing_into_its_inputs_does_not_corrupt_the_reference(monkeypatch) -> None:
    # Like Liger's RoPE on transposed views: the implementation overwrites q and k after
    # producing its (correct) outputs. Had the reference been computed from the same
    # tensors, it would see zeros and the check would fail. (.data: a write autograd does
    # not see, as a Triton kernel's store through a raw pointer.)
    def wrap(fwd):
        def in_place(v):
            outs = fwd(v)
            v["q"].data.zero_()
            v["k"].data.zero_()
            return outs

        return in_place

    _wrap_build(monkeypatch, kernels.RopeSpec, wrap)
    p = _run(make_job("rope", pass_="full"))
    assert p["correctness"]["passed"] is True, p["correctness"]
    assert p["status"] == "ok"


class _ClobberGradOutput(torch.autograd.Function):
    """Identity whose backward zeroes the incoming gradient in place, as
    LigerRMSNorm(in_place=True) overwrites dY with dX."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        out = g.clone()
        g.zero_()
        return out


def test_kernel_writing_into_grad_output_does_not_corrupt_the_reference(monkeypatch) -> None:
    _wrap_build(
        monkeypatch,
        kernels.RmsNormSpec,
        lambda fwd: lambda v: tuple(_ClobberGradOutput.apply(o) for o in fwd(v)),
    )
    p = _run(make_job("rms_norm", pass_="backward"))
    assert p["correctness"]["passed"] is True, p["correctness"]


def test_inputs_given_to_the_implementation_are_clones() -> None:
    spec = kernels.KERNELS["rope"]
    wl, _ = spec.resolve({"seq": 16, "hidden": 64, "q_heads": 4, "kv_heads": 2, "dtype": "fp32"})
    impl = spec.build(wl, "huggingface", torch.device("cpu"), None)
    seen: list[torch.Tensor] = []
    original = impl.forward

    def spy(v):
        seen.extend([v["q"], v["k"]])
        return original(v)

    result = run_check(
        spec, dataclasses.replace(impl, forward=spy), wl, torch.device("cpu"), "full", 5
    )
    assert result.passed
    # The implementation saw transposed views of fresh leaves that require grad, just
    # like upstream's q = randn(..., requires_grad=True).transpose(1, 2).
    q = seen[0]
    assert not q.is_leaf and q._base is not None and q._base.requires_grad
    assert q.shape == (1, 4, 16, 16)


def test_tolerance_table_covers_every_dtype() -> None:
    from kirunner.workload import DTYPE_NAMES

    assert set(TOLERANCES) == set(DTYPE_NAMES)
    # bf16 has 8 bits of mantissa, fp16 11, fp32 24: looser for fewer bits.
    assert TOLERANCES["bf16"] > TOLERANCES["fp16"] > TOLERANCES["fp32"]

"""fused_linear_cpo_loss, fused_linear_simpo_loss: benchmark/scripts/benchmark_{cpo,simpo}_loss.py
at Liger-Kernel 02bac05 (the CSV names the kernels `fused_linear_*`).

The sweep is over B (2 to 16 sequences, the first half chosen, the second rejected); the fixed
config is T 1024, H 4096, V 128256, bfloat16 (`"mode"` is never read; listed as unused).
Inputs: `_input = randn(B, T, H, requires_grad=True)`, `target = randint(V, (B, T))`, no
ignored tokens.

Upstream's oddity, reproduced: the providers are lambdas that *build the module inside every
call*, `TorchLMHeadCPO(H, V, dtype).to(device)(x, target)[0]`: a `Linear(H, V, bias=False)`
allocated and Kaiming-initialised on the CPU, then copied to the GPU. At H 4096 and V 128256
that is 525M bf16 weights per call, and it is most of what the forward and full rows time
(about 2.9 s on the H200 for either provider, whatever B). The runner builds them the same
way in every call (`PerCallHead`). Backward times `y.backward(retain_graph=True)` on one
forward's graph (so one module, its weight gradient accumulating), with grad_to_none
[_input]. Speed rep 100, style `scalar_loss`; memory full only (`scalar_loss_full`), with
the per-call module counted in the peak as upstream.
- `liger`: the test suite's `LigerLMHeadCPO` / `LigerLMHeadSimPO` (test/chunked_loss/):
  `LigerFusedLinearCPOLoss()` / `LigerFusedLinearSimPOLoss()` at their defaults (beta 0.1,
  alpha 1, NLL term on; CPO sums the log-probabilities, SimPO averages them and subtracts
  gamma 0.5) called on (lin.weight, x, target, None);
- `huggingface`: the test suite's `TorchLMHeadCPO` (`HFCPOLoss` on `HFAlignmentLoss` of
  test/utils.py), re-implemented below with the same operations: logits `x @ W.t()` then
  `.float()`, the chosen half's `CrossEntropyLoss` (alpha 1), summed log-probabilities of
  the targets, `-logsigmoid(beta * (chosen - rejected))`, and the same detached means of the
  logits it returns. The SimPO script times this *same* CPO baseline (`TorchLMHeadCPO` with
  its default `loss_type="sigmoid"`), so its two lines compute different losses: each
  provider is checked against its own float64 loss.
The check reads the weights of the module the checked call builds (`PerCallHead`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..building import Impl, KernelSpec, randn, torch_dtype, torch_info
from ..impls import load_liger
from ..workload import Param, WorkloadError

BETA, ALPHA = 0.1, 1.0  # every default the scripts keep
IGNORE_INDEX = -100

# kernel -> (liger module, liger class, liger averages log-probs, liger gamma, test module)
_RECIPES = {
    "fused_linear_cpo_loss": ("cpo_loss", "LigerFusedLinearCPOLoss", False, 0.0, "test_cpo_loss"),
    "fused_linear_simpo_loss": (
        "simpo_loss",
        "LigerFusedLinearSimPOLoss",
        True,
        0.5,
        "test_simpo_loss",
    ),
}


class PerCallHead:
    """The module a script's lambda builds inside every call, as the check can see it.

    The check reads `named_parameters()` once, before its one forward call: that builds the
    module the call will take, so the gradients checked are those of the weights the call
    used. Every other call (all the measured ones) builds a fresh module, as upstream."""

    def __init__(self, factory, trained: str = "lin") -> None:
        self.factory, self.trained = factory, trained
        self._next: Any = None
        self.checked: Any = None  # the checked call's module, until the reference takes it

    def named_parameters(self):
        self._next = self.checked = self.factory()
        return getattr(self._next, self.trained).named_parameters(prefix=self.trained)

    def parameters(self):
        """None held between calls: each call's module is its own, gone when the call is."""
        return iter(())

    def take(self):
        module, self._next = self._next, None
        return module if module is not None else self.factory()

    def release(self):
        """The checked call's module, let go so that it is not live while measuring."""
        module, self.checked = self.checked, None
        return module


ONCE_FROM = (0, 6, 1)  # 1ea9175a: the scripts build the modules once from this release on


def built_once(revision: str | None) -> bool:
    """Whether the script at this liger release builds both providers' modules once, outside
    the measurement (benchmark_{cpo,simpo,orpo,dpo}_loss.py from 0.6.1 on; 0.6.0's 02bac05
    and 5e8f12b build them in every call)."""
    try:
        return tuple(int(p) for p in str(revision).split(".")[:3]) >= ONCE_FROM
    except ValueError:
        return False


class OnceHead:
    """The provider's module built once, with the other provider's head beside it (both
    live, as the script from 0.6.1 on builds both), in PerCallHead's interface."""

    def __init__(self, module, other, trained: str = "lin") -> None:
        self.module, self.other, self.trained = module, other, trained

    def named_parameters(self):
        return getattr(self.module, self.trained).named_parameters(prefix=self.trained)

    def parameters(self):
        """The measured provider's weights, whose gradients a memory job's warm-up clears
        (kirunner/runner.py): the module is live across calls, so its grads would be too."""
        return self.module.parameters()

    def take(self):
        return self.module

    def release(self):
        return self.module  # and still held: live while measuring, as upstream


def head_for(revision, factory, other_factory):
    """(the module the impl calls, the note saying how it was built) for this release."""
    if built_once(revision):
        note = "both providers' modules built once, outside the measurement, as the script from 0.6.1 on"
        return OnceHead(factory(), other_factory()), note
    return PerCallHead(
        factory
    ), "the module is built on the CPU and moved in every call, as upstream"


def lm_head(wl, *, bias: bool, ref_bias: bool | None = None, device=None):
    """`lin` (and `ref_lin` where ref_bias is given) as the test suite's LMHead modules build
    them: `Linear(H, V)` in the dtype, on the CPU unless a device is given."""
    import torch

    dtype = torch_dtype(wl["dtype"])
    head = torch.nn.Module()
    head.lin = torch.nn.Linear(wl["hidden"], wl["V"], bias=bias, dtype=dtype, device=device)
    if ref_bias is not None:
        head.ref_lin = torch.nn.Linear(
            wl["hidden"], wl["V"], bias=ref_bias, dtype=dtype, device=device
        )
    return head


def hf_batch_logps(logits, labels, ignore_index, average):
    """HFAlignmentLoss.get_batch_logps."""
    import torch

    if logits.shape[:-1] != labels.shape:
        raise ValueError(
            "Logits (batch and sequence length dim) and labels must have the same shape."
        )
    loss_mask = labels != ignore_index
    labels = torch.where(labels == ignore_index, 0, labels)
    per_token = torch.gather(logits.log_softmax(-1), dim=2, index=labels.unsqueeze(2)).squeeze(2)
    if average:
        return (per_token * loss_mask).sum(-1) / loss_mask.sum(-1)
    return (per_token * loss_mask).sum(-1)


def _split(values, labels, unpaired):
    if unpaired and labels is not None:
        return values[labels], values[~labels]
    half = values.shape[0] // 2
    return values[:half], values[half:]


def hf_alignment_loss(weight, x, target, bias, alignment, *, ignore_index, alpha=ALPHA,
                      compute_nll=True, average=True, unpaired=False, ref=None, labels=None,
                      **loss_kwargs):  # fmt: skip
    """HFAlignmentLoss.get_batch_loss_metrics (test/utils.py at 02bac05), operation for
    operation: `ref` is (ref_input, ref_weight, ref_bias) for the losses with a reference
    model; `alignment` returns (losses, *aux)."""
    import torch

    # The policy's forward in a function of its own, as upstream's concatenated_forward: the
    # logits it made and does not return (the bf16 product, and the float32 copy where the
    # chosen and rejected logits are copies) are freed before the reference's are made,
    # so both peak alike (one bf16 logits tensor apart, dpo on the H100, when this was inline).
    chosen_logps, rejected_logps, chosen_logits, rejected_logits, nll = _concatenated_forward(
        weight, x, target, bias, ignore_index, compute_nll, average, unpaired, labels
    )
    if ref is not None:
        ref_input, ref_weight, ref_bias = ref
        with torch.no_grad():
            ref_logits = ref_input @ ref_weight.t()  # bf16: never cast to float upstream
            if ref_bias is not None:
                ref_logits = ref_logits + ref_bias
            ref_logps = hf_batch_logps(ref_logits, target, ignore_index, average)
            loss_kwargs["ref_chosen_logps"], loss_kwargs["ref_rejected_logps"] = _split(
                ref_logps, labels, unpaired
            )
    losses, *aux = alignment(chosen_logps, rejected_logps, **loss_kwargs)
    loss = nll * alpha + losses.mean()
    if not unpaired:
        out = (chosen_logps, rejected_logps, chosen_logits.detach().mean(),
               rejected_logits.detach().mean(), nll)  # fmt: skip
    else:
        out = (chosen_logps.detach().sum(), rejected_logps.detach().sum(),
               chosen_logits.detach().sum(), rejected_logits.detach().sum())  # fmt: skip
    return loss, (*out, *aux)


def _concatenated_forward(weight, x, target, bias, ignore_index, compute_nll, average,
                          unpaired, labels):  # fmt: skip
    """HFAlignmentLoss.concatenated_forward."""
    import torch

    outputs = x @ weight.t()
    if bias is not None:
        outputs = outputs + bias
    all_logits = outputs.float()
    half = x.shape[0] // 2
    nll = torch.tensor(0.0, device=all_logits.device)
    if compute_nll:
        chosen = all_logits[:half]
        nll = torch.nn.CrossEntropyLoss(ignore_index=ignore_index)(
            chosen.view(-1, chosen.shape[-1]), target[:half].view(-1).to(chosen.device)
        )
    chosen_logps, rejected_logps = _split(
        hf_batch_logps(all_logits, target, ignore_index, average), labels, unpaired
    )
    chosen_logits, rejected_logits = _split(all_logits, labels, unpaired)
    return chosen_logps, rejected_logps, chosen_logits, rejected_logits, nll


def hf_cpo_sigmoid(chosen_logps, rejected_logps, beta=BETA, label_smoothing=0.0):
    """HFCPOLoss.alignment_loss with loss_type "sigmoid"."""
    import torch.nn.functional as F

    logits = chosen_logps - rejected_logps
    losses = (-F.logsigmoid(beta * logits) * (1 - label_smoothing)
              - F.logsigmoid(-beta * logits) * label_smoothing)  # fmt: skip
    return losses, beta * chosen_logps, beta * rejected_logps


def reference_logps(logits, target, ignore_index, average):
    """float64 per-sequence log-probability of the targets, summed or averaged over the
    tokens that are not ignored."""
    import torch

    mask = target != ignore_index
    labels = torch.where(mask, target, 0)
    per_token = logits.log_softmax(-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    total = (per_token * mask).sum(-1)
    return total / mask.sum(-1) if average else total


def reference_cpo(x, weight, target, *, average, gamma, bias=None):
    """float64 CPO / SimPO: alpha * the chosen half's mean NLL plus the mean of
    -log sigmoid(beta * (chosen - rejected) - gamma)."""
    import torch.nn.functional as F

    logits = x @ weight.t()
    if bias is not None:
        logits = logits + bias
    half = x.shape[0] // 2
    nll = F.cross_entropy(logits[:half].reshape(-1, logits.shape[-1]),
                          target[:half].reshape(-1), ignore_index=IGNORE_INDEX)  # fmt: skip
    logps = reference_logps(logits, target, IGNORE_INDEX, average)
    margin = BETA * (logps[:half] - logps[half:]) - gamma
    return ALPHA * nll + F.softplus(-margin).mean()


@dataclass
class PreferenceImpl(Impl):
    average: bool = False  # this provider's log-probabilities are per-token means
    gamma: float = 0.0  # SimPO's margin, zero for CPO


def even_batch(spec_name: str, wl: dict[str, Any]) -> None:
    if wl["batch"] % 2:
        raise WorkloadError(f"{spec_name}: batch must be even (half chosen, half rejected)")


@dataclass(frozen=True)
class PairedPreferenceSpec(KernelSpec):
    def validate(self, wl):
        even_batch(self.name, wl)

    def make_inputs(self, wl, device, gen):
        import torch

        shape = (wl["batch"], wl["seq"], wl["hidden"])
        x = randn(shape, torch_dtype(wl["dtype"]), device, gen)
        target = torch.randint(0, wl["V"], shape[:2], device=device, generator=gen)
        return {"x": x, "target": target}

    def build(self, wl, provider, device, revision):
        import torch

        module_name, class_name, liger_average, liger_gamma, test = _RECIPES[self.name]
        if provider == "huggingface":

            def head():
                return lm_head(wl, bias=False).to(device)

            def call(m, v):
                return hf_alignment_loss(m.lin.weight, v["x"], v["target"], m.lin.bias,
                                         hf_cpo_sigmoid, ignore_index=IGNORE_INDEX,
                                         average=False)  # fmt: skip

            what = f"TorchLMHeadCPO of Liger-Kernel test/chunked_loss/{test}.py at 02bac05"
            info, average, gamma = torch_info(what), False, 0.0
        else:
            mod, info = load_liger(
                f"liger_kernel.chunked_loss.{module_name}",
                revision,
                device_type=torch.device(device).type,
            )
            loss_class = getattr(mod, class_name)

            def head():
                m = lm_head(wl, bias=False)
                m.loss = loss_class()
                return m.to(device)

            def call(m, v):
                return m.loss(m.lin.weight, v["x"], v["target"], m.lin.bias)

            average, gamma = liger_average, liger_gamma
        per_call, note = head_for(revision, head, lambda: lm_head(wl, bias=False, device=device))
        info.notes.append(note)

        def fwd(v):
            return (call(per_call.take(), v)[0],)

        return PreferenceImpl(fwd, info, module=per_call, average=average, gamma=gamma)

    def reference(self, views, params, wl, impl):
        impl.module.release()  # not live while measuring
        x, weight = views["x"], params["lin.weight"]
        return (reference_cpo(x, weight, views["target"], average=impl.average, gamma=impl.gamma),)


def _spec(name: str) -> PairedPreferenceSpec:
    return PairedPreferenceSpec(
        name=name,
        script=f"benchmark/scripts/benchmark_{name.removeprefix('fused_linear_')}.py",
        providers=("liger", "huggingface"),
        upstream_rep=100,
        style="scalar_loss",
        memory_style="scalar_loss_full",
        params=(
            Param("batch", ("B", "bsz", "batch_size"), help="sequences, half chosen (the swept x)"),
            Param("seq", ("T", "seq_len")),
            Param("hidden", ("H", "hidden_size")),
            Param("V", ("vocab", "vocab_size")),
            Param("dtype", kind="dtype"),
        ),
        inputs=("x",),
        outputs=("loss",),
        small_caps={"batch": 4, "seq": 8, "hidden": 64, "V": 512},
    )


SPECS = tuple(_spec(name) for name in _RECIPES)

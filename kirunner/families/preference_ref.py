"""dpo_loss, kto_loss: benchmark/scripts/benchmark_{dpo,kto}_loss.py at Liger-Kernel 02bac05,
the preference losses with a reference model.

The sweep is over B (2 to 32); the fixed config is T 512, H 1024, V 128256, bfloat16, bias
True, beta 0.1, ignore_index 42 (a real token id: targets that draw 42 are ignored too;
`"mode"` is never read and listed as unused). Inputs, drawn in the scripts' order:
- dpo: `_input = randn(B, T, H)` and `ref_input` likewise, `target = randint(V, (B, T))`;
- kto: `_input`, `target`, `preference_labels = randint(2, (B,), dtype=bool)`, `kl = randn(1)`
  in the dtype, then (after the padding) `ref_input`;
then `randint(1, B*T // 2)` target positions, drawn by `randperm`, set to ignore_index.
Neither script sets requires_grad on `_input`: only the policy linear's weight and bias get
gradients, and backward's grad_to_none [_input] resets nothing (style `frozen_input_loss`:
forward, then `y.backward(retain_graph=True)` on one forward, or a forward and `y.backward()`,
rep 100; memory full only, `frozen_input_loss_full`).

dpo builds its modules *inside every call*, as the script's lambdas do:
`TorchLMHeadDPO(H, V, dtype, beta, ignore_index, bias).to(device)` (a policy `Linear(H, V)`
with bias and a reference `Linear(H, V)` without, allocated and initialised on the CPU and
copied over: 263M bf16 weights a call, most of the 1.45 s the H200 rows time for forward and
full). The runner does the same (`PerCallHead`). kto builds both providers' modules once,
before timing (four linears live), with the reference linear's bias off in the speed function
and on in the memory function (`use_ref_bias=bias` is passed there only); the runner draws
that bias (uniform, as `Linear` initialises it) as a memory-only input for both modules.
- `liger`: the test suite's `LigerLMHeadDPO` (`LigerFusedLinearDPOLoss(ignore_index, beta,
  use_ref_model=True, compute_nll_loss=False, average_log_prob=True)`) and the script's
  `LigerLMHeadKTO` (`LigerFusedLinearKTOLoss(ignore_index, beta, use_ref_model=True)`, whose
  `average_log_prob` defaults to False: it *sums* the log-probabilities);
- `huggingface`: the test suite's `HFDPOLoss` and `HFKTOLoss` on `HFAlignmentLoss`
  (test/chunked_loss/, test/utils.py), re-implemented in `preference.hf_alignment_loss` with
  the same operations, log-probabilities averaged over the tokens (the KTO baseline averages
  while liger's KTO sums: the two KTO lines compute different losses, and each provider is
  checked against its own). Their reference log-probabilities are taken from bf16 logits
  (HFAlignmentLoss.get_ref_logps never casts to float), the policy's from float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..building import Impl, KernelSpec, randn, torch_dtype, torch_info
from ..impls import load_liger
from ..workload import Param
from .preference import even_batch, head_for, hf_alignment_loss, lm_head, reference_logps

# kernel -> (liger module, liger class, test module, liger averages log-probs)
_RECIPES = {
    "dpo_loss": ("dpo_loss", "LigerFusedLinearDPOLoss", "test_dpo_loss", True),
    "kto_loss": ("kto_loss", "LigerFusedLinearKTOLoss", "test_kto_loss", False),
}


def hf_dpo(chosen_logps, rejected_logps, ref_chosen_logps, ref_rejected_logps, *, beta):
    """HFDPOLoss.alignment_loss."""
    import torch.nn.functional as F

    chosen_logratios = chosen_logps - ref_chosen_logps
    rejected_logratios = rejected_logps - ref_rejected_logps
    chosen_rewards = beta * chosen_logratios
    rejected_rewards = beta * rejected_logratios
    losses = -F.logsigmoid(beta * (chosen_logratios - rejected_logratios))
    return losses, chosen_rewards, rejected_rewards


def hf_kto(chosen_logps, rejected_logps, ref_chosen_logps, ref_rejected_logps, *, beta, kl=None):
    """HFKTOLoss.alignment_loss, its empty-half branches included."""
    import torch
    import torch.nn.functional as F

    if kl is None:
        kl = torch.zeros(1).to(chosen_logps.device)
    chosen_logratios = chosen_logps - ref_chosen_logps
    if chosen_logps.shape[0] != 0 or ref_chosen_logps.shape[0] != 0:
        chosen_losses = 1 - F.sigmoid(beta * (chosen_logratios - kl))
    else:
        chosen_losses = torch.Tensor([]).to(chosen_logps.device)
    rejected_logratios = rejected_logps - ref_rejected_logps
    if rejected_logps.shape[0] != 0 or ref_rejected_logps.shape[0] != 0:
        rejected_losses = 1 - F.sigmoid(beta * (kl - rejected_logratios))
    else:
        rejected_losses = torch.Tensor([]).to(rejected_logps.device)
    losses = torch.cat((chosen_losses, rejected_losses), 0)
    return losses, (beta * chosen_logratios).sum(), (beta * rejected_logratios).sum()


def _pad_with_ignored(target, wl, device, gen):
    """The scripts' padding: randint(1, B*T // 2) positions of randperm(B*T) ignored."""
    import torch

    n = target.numel()
    count = int(torch.randint(1, n // 2, (1,), device=device, generator=gen))
    where = torch.randperm(n, device=device, generator=gen)[:count]
    target.view(-1)[where] = wl["ignore_index"]


@dataclass
class RefPreferenceImpl(Impl):
    average: bool = True  # this provider's log-probabilities are per-token means
    ref_lin: Any = None  # kto: the reference linear (dpo's is built per call)


def _liger_loss(name, revision, device, wl):
    import torch

    module_name, class_name = _RECIPES[name][:2]
    mod, info = load_liger(
        f"liger_kernel.chunked_loss.{module_name}", revision, device_type=torch.device(device).type
    )
    cls = getattr(mod, class_name)
    common = {"ignore_index": wl["ignore_index"], "beta": wl["beta"], "use_ref_model": True}
    if name == "dpo_loss":
        return (lambda: cls(**common, compute_nll_loss=False, average_log_prob=True)), info
    return (lambda: cls(**common)), info


@dataclass(frozen=True)
class RefPreferenceSpec(KernelSpec):
    def validate(self, wl):
        if self.name == "dpo_loss":
            even_batch(self.name, wl)

    def make_inputs(self, wl, device, gen):
        import torch

        dtype, shape = torch_dtype(wl["dtype"]), (wl["batch"], wl["seq"], wl["hidden"])
        x = randn(shape, dtype, device, gen)
        if self.name == "dpo_loss":
            ref_x = randn(shape, dtype, device, gen)
        target = torch.randint(0, wl["V"], shape[:2], device=device, generator=gen)
        out = {"x": x, "target": target}
        if self.name == "kto_loss":
            out["labels"] = torch.randint(0, 2, (wl["batch"],), device=device, generator=gen).bool()
            out["kl"] = randn((1,), dtype, device, gen)
        _pad_with_ignored(target, wl, device, gen)
        if self.name == "kto_loss":
            ref_x = randn(shape, dtype, device, gen)
        out["ref_x"] = ref_x
        return out

    def memory_inputs(self, wl, device, gen):
        if self.name != "kto_loss" or not wl["bias"]:
            return None
        import torch

        raw = self.make_inputs(wl, device, gen)
        bound = wl["hidden"] ** -0.5  # nn.Linear's bias initialisation
        for key in ("ref_bias", "other_ref_bias"):  # one per provider's reference linear
            raw[key] = torch.empty(wl["V"], dtype=raw["x"].dtype, device=device).uniform_(
                -bound, bound, generator=gen
            )
        return raw

    def build(self, wl, provider, device, revision):
        if self.name == "dpo_loss":
            return self._build_dpo(wl, provider, device, revision)
        return self._build_kto(wl, provider, device, revision)

    def _build_dpo(self, wl, provider, device, revision):
        if provider == "huggingface":

            def head():
                return lm_head(wl, bias=wl["bias"], ref_bias=False).to(device)

            def call(m, v):
                return hf_alignment_loss(
                    m.lin.weight, v["x"], v["target"], m.lin.bias, hf_dpo,
                    ignore_index=wl["ignore_index"], compute_nll=False, average=True,
                    ref=(v["ref_x"], m.ref_lin.weight, m.ref_lin.bias), beta=wl["beta"],
                )  # fmt: skip

            info = torch_info(
                "TorchLMHeadDPO of Liger-Kernel test/chunked_loss/test_dpo_loss.py at 02bac05"
            )
        else:
            make_loss, info = _liger_loss(self.name, revision, device, wl)

            def head():
                m = lm_head(wl, bias=wl["bias"], ref_bias=False)
                m.loss = make_loss()
                return m.to(device)

            def call(m, v):
                return m.loss(m.lin.weight, v["x"], v["target"], m.lin.bias,
                              v["ref_x"], m.ref_lin.weight, m.ref_lin.bias)  # fmt: skip

        per_call, note = head_for(revision, head, lambda: lm_head(
            wl, bias=wl["bias"], ref_bias=False, device=device))  # fmt: skip
        info.notes.append(note.replace("the module is", "the modules are"))

        def fwd(v):
            return (call(per_call.take(), v)[0],)

        return RefPreferenceImpl(fwd, info, module=per_call, average=True)

    def _build_kto(self, wl, provider, device, revision):
        import torch

        mine = lm_head(wl, bias=wl["bias"], ref_bias=False, device=device)
        other = lm_head(wl, bias=wl["bias"], ref_bias=False, device=device)
        if provider == "huggingface":

            def fwd(v):
                ref = (v["ref_x"], mine.ref_lin.weight, v.get("ref_bias"))
                return (hf_alignment_loss(
                    mine.lin.weight, v["x"], v["target"], mine.lin.bias, hf_kto,
                    ignore_index=wl["ignore_index"], compute_nll=False, average=True,
                    unpaired=True, ref=ref, labels=v["labels"], beta=wl["beta"], kl=v["kl"],
                )[0],)  # fmt: skip

            info = torch_info(
                "TorchLMHeadKTO of Liger-Kernel benchmark_kto_loss.py at 02bac05 (HFKTOLoss)"
            )
            average = True
        else:
            make_loss, info = _liger_loss(self.name, revision, device, wl)
            loss = make_loss()

            def fwd(v):
                return (loss(_input=v["x"], lin_weight=mine.lin.weight, target=v["target"],
                             preference_labels=v["labels"], bias=mine.lin.bias,
                             ref_input=v["ref_x"], ref_weight=mine.ref_lin.weight,
                             ref_bias=v.get("ref_bias"), kl=v["kl"])[0],)  # fmt: skip

            average = False
        info.notes.append("linears built on the device, not initialised on the CPU and moved")
        return RefPreferenceImpl(fwd, info, module=torch.nn.ModuleDict({"lin": mine.lin}),
                                 average=average, ref_lin=mine.ref_lin, other_head=other)  # fmt: skip

    def reference(self, views, params, wl, impl):
        import torch
        import torch.nn.functional as F

        ref_lin = impl.module.release().ref_lin if self.name == "dpo_loss" else impl.ref_lin
        weight, bias = params["lin.weight"], params.get("lin.bias")
        ref_w = ref_lin.weight.detach().to(torch.float64)
        ref_b = views.get("ref_bias")
        if ref_b is None and ref_lin.bias is not None:
            ref_b = ref_lin.bias.detach().to(torch.float64)
        logits = views["x"] @ weight.t() + (0 if bias is None else bias)
        ref_logits = views["ref_x"] @ ref_w.t() + (0 if ref_b is None else ref_b)
        ignore = wl["ignore_index"]
        ratio = reference_logps(logits, views["target"], ignore, impl.average) - reference_logps(
            ref_logits, views["target"], ignore, impl.average
        )
        beta = wl["beta"]
        if self.name == "dpo_loss":
            half = ratio.shape[0] // 2
            return (F.softplus(-beta * (ratio[:half] - ratio[half:])).mean(),)
        sign = torch.where(views["labels"], 1.0, -1.0).to(torch.float64)
        return ((1 - torch.sigmoid(beta * (ratio - views["kl"]) * sign)).mean(),)


def _spec(name: str) -> RefPreferenceSpec:
    return RefPreferenceSpec(
        name=name,
        script=f"benchmark/scripts/benchmark_{name}.py",
        providers=("liger", "huggingface"),
        upstream_rep=100,
        style="frozen_input_loss",
        memory_style="frozen_input_loss_full",
        params=(
            Param("batch", ("B", "bsz", "batch_size"), help="sequences (the swept x)"),
            Param("seq", ("T", "seq_len")),
            Param("hidden", ("H", "hidden_size")),
            Param("V", ("vocab", "vocab_size")),
            Param("dtype", kind="dtype"),
            Param("bias", kind="bool", default=True, required=False),
            Param("beta", kind="float", default=0.1, required=False),
            Param("ignore_index", kind="sint", default=42, required=False),
        ),
        inputs=(),
        outputs=("loss",),
        small_caps={"batch": 4, "seq": 16, "hidden": 64, "V": 512},
    )


SPECS = tuple(_spec(name) for name in _RECIPES)

"""The huggingface baseline of dpo and kto against upstream's own HFAlignmentLoss, on the CPU:
the peak of one full pass (forward and backward) of each, as the runner's CPU memory harness
reads it, and their losses.

    .venv/bin/python bench/fidelity/hf_alignment_memory.py /path/to/Liger-Kernel.git [ab7fe2a]

Upstream's classes are taken from test/utils.py and test/chunked_loss/test_{dpo,kto}_loss.py
at the commit (`git show`), compiled from their own source, and called as the benchmark scripts
call them. Prints, per loss, the two peaks in MiB and in bf16 logits tensors (B x T x V x 2
bytes) apart, and whether the losses are equal.
"""

from __future__ import annotations

import abc
import ast
import subprocess
import sys
import typing
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from kirunner import harness  # noqa: E402
from kirunner.families import preference, preference_ref  # noqa: E402

B, T, H, V = 4, 64, 64, 8192


def upstream_classes(git_dir: str, commit: str) -> dict:
    names = {
        "test/utils.py": {"HFAlignmentLoss"},
        "test/chunked_loss/test_dpo_loss.py": {"HFDPOLoss"},
        "test/chunked_loss/test_kto_loss.py": {"HFKTOLoss"},
    }
    # What their modules import, under the names their annotations use.
    ns = {"torch": torch, "nn": nn, "F": F, "abstractmethod": abc.abstractmethod}
    ns.update({name: getattr(typing, name) for name in ("List", "Optional", "Tuple")})
    for path, wanted in names.items():
        text = subprocess.run(["git", "-C", git_dir, "show", f"{commit}:{path}"],
                              check=True, capture_output=True, text=True).stdout  # fmt: skip
        lines = text.splitlines()
        for node in ast.parse(text).body:
            if isinstance(node, ast.ClassDef) and node.name in wanted:
                exec("\n".join(lines[node.lineno - 1 : node.end_lineno]), ns)  # noqa: S102
    return ns


def main() -> None:
    git_dir, commit = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "ab7fe2a")
    ns = upstream_classes(git_dir, commit)
    gen = torch.Generator().manual_seed(0)
    dt = torch.bfloat16
    lin, ref = nn.Linear(H, V, dtype=dt), nn.Linear(H, V, dtype=dt)
    x, rx = (torch.randn(B, T, H, dtype=dt, generator=gen) for _ in range(2))
    target = torch.randint(0, V, (B, T), generator=gen)
    labels, kl = torch.tensor([True, False, True, True]), torch.randn(1, dtype=dt, generator=gen)
    common = {"ignore_index": 42, "beta": 0.1, "use_ref_model": True}
    cases = {
        "dpo": (
            lambda: ns["HFDPOLoss"](**common).get_batch_loss_metrics(
                lin.weight, x, target, lin.bias, rx, ref.weight, None, average_log_prob=True),
            lambda: preference.hf_alignment_loss(
                lin.weight, x, target, lin.bias, preference_ref.hf_dpo, ignore_index=42,
                compute_nll=False, ref=(rx, ref.weight, None), beta=0.1),
        ),
        "kto": (
            lambda: ns["HFKTOLoss"](**common).get_batch_loss_metrics(
                weight=lin.weight, _input=x, target=target, bias=lin.bias, ref_input=rx,
                ref_weight=ref.weight, ref_bias=ref.bias, preference_labels=labels, kl=kl),
            lambda: preference.hf_alignment_loss(
                lin.weight, x, target, lin.bias, preference_ref.hf_kto, ignore_index=42,
                compute_nll=False, unpaired=True, ref=(rx, ref.weight, ref.bias),
                labels=labels, beta=0.1, kl=kl),
        ),
    }  # fmt: skip
    unit = B * T * V * 2 / 2**20
    for name, (theirs, ours) in cases.items():
        # In the order theirs, ours, ours, theirs, each the mean of its two: every measurement
        # in one process reads about 1 MiB above the one before it (the runner's CPU harness
        # counts from its profiler's start), and this order cancels that drift.
        peaks = {"theirs": [], "ours": []}
        for who in ("theirs", "ours", "ours", "theirs"):
            loss = theirs if who == "theirs" else ours
            lin.zero_grad(set_to_none=True)
            m = harness.memory_cpu(lambda loss=loss: lambda: loss()[0].backward(), quantiles=[0.5])
            peaks[who].append(m.quantiles[0])
        peaks = [sum(peaks["theirs"]) / 2, sum(peaks["ours"]) / 2]
        with torch.no_grad():
            same = torch.equal(theirs()[0], ours()[0])
        print(f"{name}: upstream {peaks[0]:.2f} MiB, runner {peaks[1]:.2f} MiB "
              f"({(peaks[1] - peaks[0]) / unit:+.2f} bf16 logits); losses equal: {same}")  # fmt: skip


if __name__ == "__main__":
    main()

"""A failed correctness check is judged by the tolerance upstream's own test sets.

The runner checks an implementation against float64 reference maths with its own criterion
(kirunner/check.py): stricter than upstream's tests, which compare two implementations in the
same dtype (Liger-Kernel's `assert_verbose_allclose`: |a - b| <= atol + rtol * |b| elementwise,
with atol and rtol per kernel and dtype in each test's parametrize). A kernel whose fp32
attention runs its matmuls in TF32 misses a float64 bound of 1e-4 and passes upstream's own
5e-3. So `incorrect` is published only where the output also misses upstream's tolerance for
that kernel and dtype at the row's commit (data/tolerance/upstream-tests/<commit>.json, one
table per commit, written by `python bench/upstream_test_tolerance.py --git-dir ... --commit C
--write`, each entry with its file, test and line). The float64 errors are always kept and shown, as accuracy.

A result records, per checked tensor, its largest error M, the largest |ref| R (M over the
relative error), the RMS scale and the worst ratio W to the runner's own bound; a runner that
also records the largest error per band of |ref| (`errorByRef`) is judged band by band. From
those figures a tensor is:
- within upstream's tolerance when every element provably is: M <= atol, or the runner's own
  bound scaled by W lies under upstream's at every |ref| in [0, R] (both are lines in |ref|;
  the error is also at most M);
- outside it when the worst element provably is: M > atol + rtol * R (no |ref| gives that
  element a larger bound), or a band's largest error exceeds the bound at the band's top;
  a NaN, an Inf, a missing gradient or a shape mismatch is outside whatever the tolerance;
- undecided otherwise: the recorded figures cannot tell, and the result carries no verdict.

Upstream's test compares the kernel with its reference implementation in the same dtype, whose
own rounding is part of what its tolerance allows. Where that reference's float64 error on the
same cell is known (the recorded accuracy of a rerun of the cell's reference provider: torch,
Transformers; on inputs drawn the same way, from another seed), a tensor is outside only where
its error exceeds the reference's own by more than upstream's bound: err - e > atol + rtol *
(|ref| + e), e being the reference's largest error on that tensor (for one set of inputs this
is the triangle inequality: kernel and reference would differ by at least err - e there). A
bf16 kernel whose float64 error is the reference's own (FNA's weight gradients at seq 4096) is
not called incorrect. Where it is not known, an fp32 output is judged as above, and a bf16 or
fp16 one that would be outside is undecided: its reference's own error, as large as the
tolerance, was never measured.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

TABLES = Path(__file__).resolve().parent.parent / "data" / "tolerance" / "upstream-tests"

WITHIN, OUTSIDE, UNDECIDED = "within", "outside", "undecided"
LOW_PRECISION = frozenset({"bf16", "fp16", "bfloat16", "float16"})


@lru_cache(maxsize=1)
def _tables() -> dict[str, dict]:
    """Each commit's table, by the commit it was read at (a short hash)."""
    tables = (json.loads(path.read_text()) for path in sorted(TABLES.glob("*.json")))
    return {table["commit"]: table for table in tables if table.get("commit")}


def _table_at(commit: str | None) -> tuple[str, dict] | None:
    """The table read at the row's commit (either hash may be the longer), or None."""
    if not commit:
        return None
    for recorded, table in _tables().items():
        if commit.startswith(recorded) or recorded.startswith(commit):
            return recorded, table
    return None


@dataclass(frozen=True)
class UpstreamTolerance:
    atol: float
    rtol: float
    source: str  # "test/...py:108 (test_name) at 02bac05"
    outputs: dict = field(default_factory=dict)  # output name -> {"atol", "rtol"}

    def bound(self, name: str) -> tuple[float, float]:
        over = self.outputs.get(name) or {}
        return float(over.get("atol", self.atol)), float(over.get("rtol", self.rtol))

    def as_facts(self) -> dict:
        facts = {"atol": self.atol, "rtol": self.rtol, "source": self.source}
        if self.outputs:
            facts["outputs"] = self.outputs
        return facts


def upstream_tolerance(
    kernel: str, dtype: str | None, commit: str | None
) -> UpstreamTolerance | None:
    """Upstream's test tolerance for the kernel and dtype at the row's commit, or None where
    the table has no test for them (or the row names another commit)."""
    found = _table_at(commit)
    if found is None:
        return None
    recorded, table = found
    entry = ((table.get("kernels") or {}).get(kernel) or {}).get(dtype or "")
    if not entry:
        return None
    return UpstreamTolerance(
        atol=float(entry["atol"]),
        rtol=float(entry["rtol"]),
        source=f"{entry['file']}:{entry['line']} ({entry['test']}) at {recorded}",
        outputs=entry.get("outputs") or {},
    )


def _num(value) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _by_bands(bands: list, atol: float, rtol: float, slack: float = 0.0) -> str:
    """Each band [low, high, largest error] of |ref|: outside where the largest error, less the
    reference implementation's own (`slack`), exceeds the bound even at the band's top, within
    where it is under the bound at its bottom."""
    state = WITHIN
    for band in bands:
        low, high, err = (_num(v) for v in band)
        if low is None or high is None or err is None:
            return UNDECIDED
        if err - slack > atol + rtol * (high + slack):
            return OUTSIDE
        if err > atol + rtol * low:
            state = UNDECIDED
    return state


def tensor_state(check: dict, atol: float, rtol: float, slack: float = 0.0) -> str:
    """Whether one checked tensor is within upstream's (atol, rtol), from its recorded figures;
    `slack`: the reference implementation's own largest float64 error on it (module docstring)."""
    if check.get("problem") or _num(check.get("maxAbsErr")) is None:
        return OUTSIDE  # NaN/Inf, no gradient, shape mismatch
    if isinstance(check.get("errorByRef"), list):
        return _by_bands(check["errorByRef"], atol, rtol, slack)
    err = float(check["maxAbsErr"])
    if err <= atol:
        return WITHIN
    rel = _num(check.get("maxRelErr"))
    ref_max = err / rel if rel else 0.0
    if err - slack > atol + rtol * (ref_max + slack):
        return OUTSIDE
    worst, scale = _num(check.get("worstRatio")), _num(check.get("scale"))
    own_atol, own_rtol = _num(check.get("atol")), _num(check.get("rtol"))
    if None in (worst, scale, own_atol, own_rtol):
        return UNDECIDED

    def bound(x: float) -> float:  # what the runner's figures allow an element at |ref| = x
        return min(err, worst * (own_atol * scale + own_rtol * x))

    # Both bounds are piecewise linear in |ref|: checking the ends and the kink suffices.
    points = [0.0, ref_max]
    if own_rtol > 0 and worst > 0:
        kink = (err / worst - own_atol * scale) / own_rtol
        if 0 < kink < ref_max:
            points.append(kink)
    if all(bound(x) <= atol + rtol * x for x in points):
        return WITHIN
    return UNDECIDED


@dataclass(frozen=True)
class Reference:
    """The reference implementation's largest float64 error per tensor on the same cell, and
    the providers it was read from (their newest recorded reruns)."""

    errors: dict  # tensor name -> largest error (the largest over the providers)
    providers: tuple[str, ...]

    @classmethod
    def of(cls, accuracies: list[tuple[str, list]]) -> Reference | None:
        """From each reference provider's recorded accuracy (its newest rerun's); None where
        no reference was rerun."""
        errors: dict = {}
        for _provider, accuracy in accuracies:
            for entry in accuracy:
                err = _num(entry.get("maxAbsErr")) if isinstance(entry, dict) else None
                if err is not None:
                    name = str(entry.get("name"))
                    errors[name] = max(errors.get(name, 0.0), err)
        providers = tuple(sorted({provider for provider, _ in accuracies}))
        return cls(errors, providers) if providers else None


@dataclass(frozen=True)
class Judged:
    state: str  # WITHIN, OUTSIDE or UNDECIDED
    tensors: list  # per checked tensor: name, state, maxAbsErr, maxRelErr, referenceErr, atol, rtol
    tolerance: UpstreamTolerance
    reference: Reference | None = None
    is_reference: bool = False

    def facts(self) -> dict:
        reference = list(self.reference.providers) if self.reference is not None else None
        return {"state": self.state, "tolerance": self.tolerance.as_facts(),
                "reference": reference, "isReference": self.is_reference,
                "tensors": self.tensors}  # fmt: skip

    def why(self) -> str:
        src = self.tolerance.source
        if self.state == WITHIN and self.is_reference:
            return (
                f"upstream's own test ({src}) measures the kernel against this implementation, "
                "so its own finite error cannot miss that test's tolerance"
            )
        if self.state == WITHIN:
            return f"every output is within the tolerance upstream's own test sets ({src})"
        shown = [t for t in self.tensors if t["state"] == self.state] or self.tensors
        parts = "; ".join(_tensor_text(t) for t in shown[:4])
        more = f" and {len(shown) - 4} more" if len(shown) > 4 else ""
        if self.reference is not None:
            against = f", allowing {', '.join(self.reference.providers)}'s own error on this cell"
        else:
            against = ", whose reference implementation's own error on this cell is not measured"
        if self.state == OUTSIDE:
            return f"outside the tolerance upstream's own test sets ({src}{against}): {parts}{more}"
        return (
            f"the recorded errors cannot tell whether the output is within the tolerance "
            f"upstream's own test sets ({src}{against}): {parts}{more}"
        )


def _tensor_text(t: dict) -> str:
    err = "NaN, Inf or no output" if t["maxAbsErr"] is None else f"max error {t['maxAbsErr']:.3g}"
    if t.get("refMax") is not None:
        ref = f" at |ref| up to {t['refMax']:.3g}"
    else:
        ref = " where the reference is exactly 0" if t["maxAbsErr"] is not None else ""
    own = f" (the reference's own {t['referenceErr']:.3g})" if t.get("referenceErr") else ""
    return f"{t['name']} {err}{own}{ref} against {t['atol']:g} + {t['rtol']:g}·|ref|"


def judge(
    checks: list,
    tolerance: UpstreamTolerance,
    reference: Reference | None = None,
    dtype: str | None = None,
    *,
    is_reference: bool = False,
) -> Judged:
    """Every checked tensor of a result against upstream's tolerance, allowing the reference
    implementation's own error on the cell where it is known: outside if any is, undecided if
    any cannot be told, else within.

    `is_reference`: the result is of the reference implementation itself (torch,
    Transformers). Upstream's test measures the kernel against it, so no finite error of its
    own can miss that test's tolerance (cuDNN's TF32 convolutions put torch's fp32 sparse
    multi-token attention 9e-3 from float64, as they do in upstream's test run): only a NaN,
    an Inf, a missing output or a shape mismatch is outside."""
    tensors = []
    for check in checks:
        if not isinstance(check, dict):
            continue
        name = str(check.get("name"))
        atol, rtol = tolerance.bound(name)
        err, rel = _num(check.get("maxAbsErr")), _num(check.get("maxRelErr"))
        slack = reference.errors.get(name) if reference is not None else None
        if is_reference and err is not None and not check.get("problem"):
            state = WITHIN  # upstream's test takes this implementation as its truth
        else:
            state = tensor_state(check, atol, rtol, slack or 0.0)
        if state == OUTSIDE and slack is None and dtype in LOW_PRECISION and err is not None:
            state = UNDECIDED  # the reference's own error, as large as the tolerance, unknown
        tensors.append(
            {
                "name": name,
                "state": state,
                "maxAbsErr": err,
                "maxRelErr": rel,
                "refMax": err / rel if err is not None and rel else None,
                "referenceErr": slack,
                "atol": atol,
                "rtol": rtol,
            }
        )
    states = {t["state"] for t in tensors}
    state = OUTSIDE if OUTSIDE in states else UNDECIDED if UNDECIDED in states else WITHIN
    if not tensors:
        state = UNDECIDED
    return Judged(state, tensors, tolerance, reference, is_reference)


def accuracy(checks: list) -> list[dict]:
    """The float64 errors of every checked tensor, as the page shows them (accuracy)."""
    rows = []
    for check in checks or []:
        if isinstance(check, dict):
            rows.append(
                {
                    "name": str(check.get("name")),
                    "maxAbsErr": _num(check.get("maxAbsErr")),
                    "maxRelErr": _num(check.get("maxRelErr")),
                }
            )
    return rows

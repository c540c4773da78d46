"""Run a held result's correctness check again, with its recorded seed, under today's rules.

    python bench/h200/recheck.py RESULT.json [--seeds N]

On the GPU it rebuilds the inputs the result's process drew (the check's generator is seeded
with the recorded seed on the same device kind), runs the implementation and the float64
reference again and prints each check's entry as JSON. For sparsemax it also lists the rows
where the implementation's support count differs from the reference's, with each row's
smallest |z - tau| in units of eps * (max|z| + 1): the rows `AtSupportEdge` allows misses in.
`--seeds N` then runs N more checks with seeds 1..N, as fresh processes would draw them, and
prints one line each (passed, misses, edge rows).

A liger result needs KIRUNNER_LIGER_ROOT, as `run.sh` sets it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _sparsemax_rows(spec, impl, wl, device, seed) -> list[dict]:
    """The rows whose float32 support count differs from float64's, and their margins."""
    import torch

    from kirunner.check import EPS
    from kirunner.families.sparsemax import _threshold

    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    x = spec.make_inputs(wl, device, gen)["x"]
    with torch.no_grad():
        got = (impl.forward({"x": x.clone()})[0] > 0).sum(-1)
        z = x.to(torch.float64)
        tau = _threshold(z)
        want = (z > tau).sum(-1)
        margin = (z - tau).abs().amin(-1) / (EPS[wl["dtype"]] * (z.abs().amax(-1) + 1))
    rows = torch.nonzero(got != want).flatten().tolist()
    return [
        {
            "row": r,
            "support": int(want[r]),
            "implSupport": int(got[r]),
            "marginEps": float(margin[r]),
        }
        for r in rows
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", type=Path)
    parser.add_argument("--seeds", type=int, default=0)
    args = parser.parse_args()

    import torch

    from kirunner import kernels
    from kirunner.check import run_check

    payload = json.loads(args.result.read_text())["payload"]
    spec = kernels.get_spec(payload["benchmark"])
    wl = payload["workload"]["ran"]
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    revision = (payload.get("implementation") or {}).get("requestedRevision")
    impl = spec.build(wl, payload["provider"], device, revision)
    seed = payload["correctness"]["seed"]
    held = {c["name"]: c for c in payload["correctness"]["checks"]}
    print(
        f"{args.result.name}: {payload['benchmark']} {payload['provider']} {payload['pass']}"
        f" {wl} on {torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}"
    )
    result = run_check(spec, impl, wl, device, payload["pass"], seed)
    for entry in result.checks:
        before = held.get(entry["name"], {})
        print(
            json.dumps(
                {
                    "held": {k: before.get(k) for k in ("passed", "worstRatio", "maxAbsErr")},
                    "now": entry,
                }
            )
        )
    print(
        f"seed {seed}: held passed={payload['correctness']['passed']}, now passed={result.passed}"
    )
    if spec.name == "sparsemax":
        print(
            json.dumps({"rowsWhereSupportDiffers": _sparsemax_rows(spec, impl, wl, device, seed)})
        )
    for s in range(1, args.seeds + 1):
        r = run_check(spec, impl, wl, device, payload["pass"], s)
        parts = []
        for c in r.checks:
            extra = {k: c[k] for k in ("mismatches", "edgeFraction") if k in c}
            parts.append(f"{c['name']} worst {c['worstRatio']:.3g} {extra}")
        print(f"seed {s}: passed={r.passed}; " + "; ".join(parts))


if __name__ == "__main__":
    main()

"""Canonicalising every signed result of data/reruns: kirunner.canonical against the rfc8785
package alone, the bytes compared for each (they must be equal), one run, figures printed.

    .venv/bin/python bench/canonical.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import rfc8785

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kirunner.canonical import canonicalize  # noqa: E402

ROOT = Path(__file__).resolve().parents[1] / "data" / "reruns"


def main() -> None:
    docs = [json.loads(p.read_text())["payload"] for p in sorted(ROOT.glob("*/results/*.json"))]
    t0 = time.perf_counter()
    ours = [canonicalize(d) for d in docs]
    t1 = time.perf_counter()
    package = [rfc8785.dumps(d) for d in docs]
    t2 = time.perf_counter()
    same = sum(a == b for a, b in zip(ours, package, strict=True))
    print(f"{len(docs)} result payloads, {same} byte-identical to the rfc8785 package")
    print(
        f"kirunner.canonical {t1 - t0:.2f} s, rfc8785 {t2 - t1:.2f} s: {(t2 - t1) / (t1 - t0):.1f}x"
    )


if __name__ == "__main__":
    main()

"""Job files for the fidelity runs: the cells of upstream's own script output, as RerunJobs.

    python bench/fidelity/make_jobs.py --csv bench/fidelity/h100-2026-12-05/upstream.csv \
        --out bench/fidelity/jobs

Reads the rows that Liger-Kernel's benchmark scripts at 02bac05 wrote on the GPU host
(bench/fidelity/upstream.sh) and writes one job per selected cell, in folders by what the
device run does with them (see bench/fidelity/README.md): `memory/` (peak-memory cells),
`ce-latency/` (cross_entropy latency, for the with/without power-sampler comparison) and
`dyt-latency/` (DyT torch_compile latency). The ids and nonces are random: these jobs are
for comparing the runner with the script, not for import.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location(
    "h200_make_jobs", HERE.parent / "h200" / "make_jobs.py"
)
h200 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(h200)

DYT_HIDDEN = {1024, 2048, 4096, 8192, 9216, 12288, 16384}
DYT_MEMORY_OTHER_HIDDEN = {1024, 8192, 16384}


def folder_of(row: dict[str, str]) -> str | None:
    kernel, provider, metric = row["kernel_name"], row["kernel_provider"], row["metric_name"]
    x = int(float(row["x_value"]))
    if metric == "memory":
        if kernel in ("geglu", "swiglu"):
            return "memory"
        if kernel == "cross_entropy" and x <= 65536:
            return "memory"
        if kernel.startswith("dyt") and (
            provider == "torch_compile" or x in DYT_MEMORY_OTHER_HIDDEN
        ):
            return "memory"
        return None
    if kernel == "cross_entropy" and x <= 32768:
        return "ce-latency"
    if kernel.startswith("dyt") and provider == "torch_compile" and x in DYT_HIDDEN:
        return "dyt-latency"
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", required=True)
    ap.add_argument("--out", default=str(HERE / "jobs"))
    args = ap.parse_args()
    out = Path(args.out)
    counts: dict[str, int] = {}
    with open(args.csv, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            folder = folder_of(row)
            if folder is None:
                continue
            job = h200.job_for(row, "fidelity-h100", json.dumps(row))
            job["job"]["gpuClass"] = "h100"
            metric = "latency" if row["metric_name"] == "speed" else "memory"
            name = "-".join(
                [
                    row["kernel_name"],
                    row["kernel_provider"],
                    row["kernel_operation_mode"],
                    metric,
                    f"{row['x_name']}{int(float(row['x_value']))}",
                ]
            )
            (out / folder).mkdir(parents=True, exist_ok=True)
            (out / folder / f"{name}.json").write_text(json.dumps(job, indent=1) + "\n")
            counts[folder] = counts.get(folder, 0) + 1
    print(counts)


if __name__ == "__main__":
    main()

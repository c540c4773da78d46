"""Make example RerunJob files from the Liger CSVs, for dry runs and for trying the runner.

These are NOT server-issued jobs: their ids and nonces are random here and the server
knows nothing of them, so their results cannot be imported. Real jobs come from
``manage.py rerun export``. The selection mirrors what the first H200 run is for: the
llama4_rope rows (stamped liger 0.6.1) and H200 rows of Liger's CI.

    python bench/h200/make_jobs.py --out bench/h200/examples [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import hashlib
import json
import secrets
import uuid
from pathlib import Path

# Upstream config key (and x_name) -> normalised name, as the server maps them.
NAMES = {
    "T": "seq",
    "seq_len": "seq",
    "H": "hidden",
    "hidden_size": "hidden",
    "N": "hidden",
    "num_q_heads": "q_heads",
    "num_kv_heads": "kv_heads",
    "B": "batch",
    "bsz": "batch",
    "V": "vocab",
    "intermediate_size": "intermediate",
}
DTYPES = {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float32": "fp32"}
KERNELS = {"llama4_rope", "rope", "rms_norm", "layer_norm", "swiglu", "geglu", "cross_entropy"}

# (kernel, x_name, x_value, provider, mode, metric): what the examples re-measure.
WANTED_MAIN = [
    ("llama4_rope", "T", "4096", prov, mode, "speed")
    for prov in ("liger", "huggingface")
    for mode in ("forward", "backward", "full")
] + [("llama4_rope", "T", "4096", prov, "full", "memory") for prov in ("liger", "huggingface")]
WANTED_CI = [
    ("rms_norm", "H", "4096", "liger", "full", "speed"),
    ("rms_norm", "H", "4096", "huggingface", "full", "speed"),
    ("swiglu", "T", "4096", "liger", "full", "speed"),
    ("cross_entropy", "V", "32768", "liger", "full", "speed"),
]


def params_of(row: dict[str, str]) -> dict:
    params: dict = {}
    for key, value in json.loads(row["extra_benchmark_config_str"]).items():
        if key == "dtype":
            params["dtype"] = DTYPES.get(value, value)
        else:
            params[NAMES.get(key, key)] = value
    x = float(row["x_value"])
    params[NAMES.get(row["x_name"], row["x_name"])] = int(x) if x.is_integer() else x
    return params


def job_for(row: dict[str, str], source: str, line: str) -> dict:
    metric = "latency" if row["metric_name"] == "speed" else "memory"
    return {
        "apiVersion": "kernelindex.dev/v1alpha1",
        "kind": "RerunJob",
        "job": {
            "id": str(uuid.uuid4()),
            "nonce": secrets.token_hex(16),
            "issuedAt": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "gpuClass": "h200",
        },
        "run": {
            "publicId": "example",
            "source": "liger-kernel-bench",
            "externalId": f"example:{source}",
            "digest": "sha256:" + hashlib.sha256(line.encode()).hexdigest(),
        },
        "benchmark": row["kernel_name"],
        "pass": row["kernel_operation_mode"],
        "metric": metric,
        "provider": row["kernel_provider"],
        "implementation": {"project": "Liger-Kernel", "revision": row["liger_version"]},
        "workload": {"parameters": params_of(row)},
        "protocol": {
            "family": "liger_kernel_bench",
            "harness": "liger-kernel-bench",
            "quantiles": [0.5, 0.2, 0.8],
            "ligerVersion": row["liger_version"],
        },
    }


def rows(path: Path):
    with path.open(newline="", encoding="utf-8") as fh:
        yield from csv.DictReader(fh)


def key_of(row: dict[str, str]) -> tuple:
    return (
        row["kernel_name"],
        row["x_name"],
        row["x_value"],
        row["kernel_provider"],
        row["kernel_operation_mode"],
        row["metric_name"],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench/h200/examples")
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[3] / "shared" / "data"))
    args = ap.parse_args()
    data, out = Path(args.data), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    found: dict[tuple, tuple[dict, str]] = {}
    for row in rows(data / "liger" / "all_benchmark_data.csv"):
        if key_of(row) in WANTED_MAIN:
            found[key_of(row)] = (row, "liger/all_benchmark_data.csv")
    # The newest CI folder with H200 rows (folders are listed in run order in commits.txt).
    order = [
        c.strip() for c in (data / "liger-ci" / "commits.txt").read_text().split() if c.strip()
    ]
    folders = sorted(
        (p for p in (data / "liger-ci").iterdir() if (p / "benchmark.csv").exists()),
        key=lambda p: order.index(p.name.split("-")[0]) if p.name.split("-")[0] in order else -1,
    )
    for folder in reversed(folders):
        hits = [
            r
            for r in rows(folder / "benchmark.csv")
            if "H200" in r["gpu_name"] and key_of(r) in WANTED_CI
        ]
        if hits:
            for r in hits:
                found[key_of(r)] = (r, f"liger-ci/{folder.name}")
            break
    for key, (row, source) in sorted(found.items()):
        name = "-".join(
            [
                key[0],
                key[3],
                key[4],
                "latency" if key[5] == "speed" else "memory",
                f"{key[1]}{key[2]}",
            ]
        )
        (out / f"{name}.json").write_text(
            json.dumps(job_for(row, source, json.dumps(row)), indent=1) + "\n"
        )
        print(f"{name}: liger {row['liger_version']} from {source}")


if __name__ == "__main__":
    main()

"""What the GPU did in each phase of a device call: nvidia-smi samples against the call's log.

    python bench/h100/smi_phases.py data/reruns/h100-2026-12-05/logs/device-call1.log \
        data/reruns/h100-2026-12-05/logs/call1-smi.csv

The log's phase lines ("[Ns] batch g1: start ...", "[Ns] upstream geglu: rc=0 wall_s=70")
give each phase's window after the call's start; the CSV (every 250 ms) gives the SM clock,
power and the active clock-event reasons (0x4: software power cap, 0x1: idle).
"""

from __future__ import annotations

import csv
import re
import statistics
import sys
from datetime import datetime, timedelta


def main() -> None:
    log_path, smi_path = sys.argv[1:3]
    lines = open(log_path).read().splitlines()
    start = datetime.strptime(
        re.search(r"call \S+ (\S+Z)", lines[0]).group(1), "%Y-%m-%dT%H:%M:%SZ"
    )
    windows, opened = [], {}
    for line in lines:
        m = re.match(r"\[(\d+)s\] (.+)", line)
        if not m:
            continue
        t, text = int(m.group(1)), m.group(2)
        if m2 := re.match(r"(batch \S+|reproduce): start", text):
            opened[m2.group(1)] = t
        elif m2 := re.match(r"(batch \S+|reproduce): rc=", text):
            windows.append((m2.group(1), opened.pop(m2.group(1), t), t))
        elif m2 := re.match(r"upstream (\S+): rc=\S+ wall_s=(\d+)", text):
            windows.append((f"script {m2.group(1)}", t - int(m2.group(2)), t))
    samples = []
    with open(smi_path, newline="") as fh:
        for row in csv.reader(fh, skipinitialspace=True):
            try:
                when = datetime.strptime(row[0], "%Y/%m/%d %H:%M:%S.%f")
                samples.append(
                    (when, int(row[1].split()[0]), float(row[3].split()[0]), int(row[5], 16))
                )
            except (ValueError, IndexError):
                continue
    print(
        f"{'phase':28} {'s':>5} {'samples':>7} {'SM MHz med':>10} {'min':>5} {'W max':>6} {'capped':>6}"
    )
    for name, a, b in windows:
        inside = [
            s
            for s in samples
            if start + timedelta(seconds=a) <= s[0] <= start + timedelta(seconds=b)
        ]
        busy = [s for s in inside if not s[3] & 0x1] or inside
        if not inside:
            print(f"{name:28} {b - a:5d} {0:7d}")
            continue
        clocks = [s[1] for s in busy]
        print(
            f"{name:28} {b - a:5d} {len(inside):7d} {statistics.median(clocks):10.0f} "
            f"{min(clocks):5d} {max(s[2] for s in inside):6.0f} {sum(bool(s[3] & 0x4) for s in inside):6d}"
        )


if __name__ == "__main__":
    main()

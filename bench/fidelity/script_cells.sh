#!/usr/bin/env bash
# bench/fidelity/script_cells.py on the lent GPU, over Liger-Kernel at one commit:
#   UPSTREAM_COMMIT=ab7fe2a [WHOLE=KERNEL WHOLE_S=300] bash bench/fidelity/script_cells.sh KERNEL...
# Needs .upstream/liger-<commit> (bench/h100/prepare.sh <git dir> <batch> <commit>). Writes
# $OUT/cells.jsonl (whole.jsonl, whole.csv), $OUT/cells.log and $OUT/smi-cells.csv (nvidia-smi every 250 ms).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
commit="${UPSTREAM_COMMIT:-ab7fe2a}"; out="${OUT:-$repo/bench/out/cells}"; mkdir -p "$out"
work="/tmp/liger-cells-$commit"; rm -rf "$work" && cp -r "$repo/.upstream/liger-$commit" "$work"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$work/pyproject.toml" | head -1)"
mkdir -p "$work/src/liger_kernel-$version.dist-info"  # utils.py reads version("liger-kernel")
printf 'Metadata-Version: 2.1\nName: liger_kernel\nVersion: %s\n' "$version" \
  > "$work/src/liger_kernel-$version.dist-info/METADATA"
nvidia-smi --query-gpu=timestamp,name,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv -lms 250 > "$out/smi-cells.csv" 2>&1 &
smi=$!
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
  t0=$(date +%s)
  (cd "$work/benchmark/scripts" && PYTHONPATH="$work/src" PYTHONUNBUFFERED=1 \
    python3 "$repo/bench/fidelity/script_cells.py" "$@" > "$out/cells.jsonl")
  echo "script_cells rc=$? wall_s=$(( $(date +%s) - t0 )) rows=$(wc -l < "$out/cells.jsonl")"
  # WHOLE=KERNEL: that script itself, unchanged but for the wrapper, for its requested peaks
  if [ -n "${WHOLE:-}" ]; then
    t0=$(date +%s)
    rm -f "$work/benchmark/data/all_benchmark_data.csv"
    (cd "$work/benchmark/scripts" && PYTHONPATH="$work/src" PYTHONUNBUFFERED=1 timeout "${WHOLE_S:-300}" \
      python3 "$repo/bench/fidelity/script_cells.py" --whole "$WHOLE" > "$out/whole.jsonl")
    echo "whole $WHOLE rc=$? wall_s=$(( $(date +%s) - t0 )) rows=$(wc -l < "$out/whole.jsonl")"
    cp "$work/benchmark/data/all_benchmark_data.csv" "$out/whole.csv" 2>/dev/null
  fi
} > "$out/cells.log" 2>&1
kill "$smi"

#!/usr/bin/env bash
# Run Liger-Kernel's own benchmark scripts at commit 02bac05, unchanged, on this GPU host.
#
#   bench/fidelity/upstream.sh geglu swiglu cross_entropy dyt
#
# Needs .upstream/liger-02bac05 in the checkout: `src`, `benchmark` and the test files the
# DyT script imports (test/__init__.py, test/utils.py, test/transformers/test_dyt.py), taken
# with `git archive 02bac05` from github.com/linkedin/Liger-Kernel, plus a one-line
# dist-info (Name liger_kernel, Version 0.6.0: the version of that checkout) so that
# utils.py's `importlib.metadata.version("liger-kernel")` answers as in an installed checkout.
# The scripts run from a copy under /tmp whose benchmark/data/all_benchmark_data.csv is
# removed first: with `overwrite=False` the scripts keep a row already in that file rather
# than write their own, so the file then holds exactly this run's rows.
# Writes to $OUT (default bench/out/fidelity): upstream.csv (the rows the scripts wrote),
# upstream.log (their output, one section per script, with wall times) and smi-upstream.csv
# (nvidia-smi every 250 ms while they ran).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# UPSTREAM_SRC / UPSTREAM_TAG: another commit's checkout (bench/h100/device.sh: ab7fe2a).
src="${UPSTREAM_SRC:-$repo/.upstream/liger-02bac05}"
[ -d "$src/benchmark/scripts" ] || { echo "upstream.sh: $src missing" >&2; exit 2; }
out="${OUT:-$repo/bench/out/fidelity}"
mkdir -p "$out"
work="/tmp/liger-${UPSTREAM_TAG:-02bac05}"
rm -rf "$work" && cp -r "$src" "$work"
rm -f "$work/benchmark/data/all_benchmark_data.csv"
# UPSTREAM_PYTHONPATH: packages put after the upstream src and ahead of site-packages (device.sh's
# PHASE@NAME: a release of transformers the script still runs under).
export PYTHONPATH="$work/src${UPSTREAM_PYTHONPATH:+:$UPSTREAM_PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=timestamp,name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active,pstate \
  --format=csv -lms 250 > "$out/smi-upstream.csv" 2>&1 &
smi=$!
{
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv
python3 -c "import sys, torch, triton, transformers; print(sys.version.split()[0], torch.__version__, torch.version.cuda, triton.__version__, transformers.__version__, torch.cuda.get_device_name())"
for k in "$@"; do
  echo "=== benchmark_$k.py start $(date -u +%FT%TZ)"
  t0=$(date +%s)
  (cd "$work/benchmark/scripts" && python3 "benchmark_$k.py") 2>&1 | grep -v '^  \|^\[\|^\]\|^{\|^}' 
  echo "=== benchmark_$k.py rc=${PIPESTATUS[0]} wall_s=$(( $(date +%s) - t0 ))"
  cp "$work/benchmark/data/all_benchmark_data.csv" "$out/upstream.csv"
done
} > "$out/upstream.log"
kill "$smi"

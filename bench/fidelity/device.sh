#!/usr/bin/env bash
# The runner beside upstream's script on one GPU host: the fidelity run's device half.
#
#   bench/fidelity/device.sh [--deadline S] PHASE...
#
# PHASE is one of
#   upstream-ce   Liger-Kernel's benchmark_cross_entropy.py at 02bac05, unchanged
#                 (bench/fidelity/upstream.sh), so host-bound cells compare on this host
#   upstream-dyt  the same for benchmark_dyt.py
#   memory        the runner on bench/fidelity/jobs/memory (peak-memory cells)
#   memory-dyt    the DyT jobs of that folder only
#   dyt-fresh     four host-bound DyT latency jobs, each in a process of its own
#   selfrun       four memory jobs, each in a runner process of its own (`python -m kirunner
#                 JOB`, as a self-run), to compare with the same jobs in a batch
#   ce-on         the runner on jobs/ce-latency with the power sampler (the default)
#   ce-off        the same with KIRUNNER_POWER_SAMPLER=off (no sampling thread)
#   dyt           the runner on jobs/dyt-latency (DyT torch_compile latency)
# in the order given; `ce-on` may be given twice (its results then go to ce-on2).
# liger-kernel is the source at 02bac05 (.upstream/liger-02bac05/src, see upstream.sh).
# nvidia-smi logs clocks, power and throttle reasons every 250 ms throughout.
# Needs the wheels of rfc8785 and jsonschema (with jsonschema-specifications, referencing,
# rpds-py) in .whl where the host lacks them.
# Writes $OUT/fidelity.tar.gz (every result, the logs, upstream's CSV) and $OUT/device.log.
# A phase starts no job after --deadline seconds (default 540) from the script's start.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo" || exit 2
deadline=540
if [ "${1:-}" = "--deadline" ]; then deadline="$2"; shift 2; fi
out="${OUT:-$repo/bench/out/fidelity}"
mkdir -p "$out"
work=/tmp/fidelity
rm -rf "$work" && mkdir -p "$work"
t0=$(date +%s)
site="$repo/.upstream/liger-02bac05/src"
# The runner's pure-Python needs the GPU image lacks (rfc8785, jsonschema and its own), as
# wheels carried in .whl (docs/runner.md).
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && site="/tmp/site:$site"
fi
export PYTHONPATH="$site" PYTHONUNBUFFERED=1
log="$out/device.log"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active,pstate \
  --format=csv -lms 250 > "$work/smi-runner.csv" 2>&1 &
smi=$!
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv,noheader
  python3 -c "import sys, torch, triton, transformers; print(sys.version.split()[0], torch.__version__, triton.__version__, transformers.__version__)"
  nproc; lscpu | grep -m1 'Model name'
} > "$log" 2>&1

runner() {  # runner NAME JOBGLOB [ENV=VALUE...]
  local name="$1" jobs="$2"; shift 2
  local left=$(( deadline - ($(date +%s) - t0) ))
  echo "=== $name start $(date -u +%FT%TZ) budget_s=$left $*" >> "$log"
  local s=$(date +%s) rc=75
  while [ "$rc" = 75 ] && [ "$left" -gt 10 ]; do
    env "$@" python3 -m kirunner batch $jobs --out-dir "$work/$name" --budget "$left" >> "$log" 2>&1
    rc=$?
    left=$(( deadline - ($(date +%s) - t0) ))
  done
  echo "=== $name rc=$rc wall_s=$(( $(date +%s) - s ))" >> "$log"
}

seen_on=0
for phase in "$@"; do
  case "$phase" in
    upstream-ce|upstream-dyt)
      k=${phase#upstream-}; [ "$k" = ce ] && k=cross_entropy
      OUT="$work/$phase" bash bench/fidelity/upstream.sh "$k"
      cat "$work/$phase/upstream.log" >> "$log" ;;
    memory) runner memory "bench/fidelity/jobs/memory/*.json" ;;
    memory-dyt) runner memory-dyt "bench/fidelity/jobs/memory/dyt*.json" ;;
    ce-on)
      seen_on=$((seen_on + 1))
      name=ce-on; [ "$seen_on" -gt 1 ] && name=ce-on$seen_on
      runner "$name" "bench/fidelity/jobs/ce-latency/*.json" ;;
    ce-off) runner ce-off "bench/fidelity/jobs/ce-latency/*.json" KIRUNNER_POWER_SAMPLER=off ;;
    dyt) runner dyt "bench/fidelity/jobs/dyt-latency/*.json" ;;
    dyt-fresh)
      # Host-bound DyT cells, each in a runner process of its own (no earlier job's
      # diagnostics in the process), to compare with the same cells timed in a batch.
      mkdir -p "$work/dyt-fresh"
      for j in "bench/fidelity/jobs/dyt-latency/"{dyt_beta=False-torch_compile-backward-latency-hidden_size4096,dyt_beta=False-torch_compile-backward-latency-hidden_size8192,dyt_beta=True-torch_compile-backward-latency-hidden_size2048,dyt_beta=True-torch_compile-full-latency-hidden_size2048}.json; do
        s=$(date +%s)
        python3 -m kirunner "$j" --out "$work/dyt-fresh/$(basename "$j")" >> "$log" 2>&1
        echo "=== dyt-fresh $(basename "$j") rc=$? wall_s=$(( $(date +%s) - s ))" >> "$log"
      done ;;
    selfrun)
      # One process per job, as a self-run runs: the peak must equal the batch's.
      mkdir -p "$work/selfrun"
      for j in bench/fidelity/jobs/memory/{geglu-liger-forward-memory-T2048,swiglu-huggingface-full-memory-T4096,dyt_beta=False-torch_compile-full-memory-hidden_size4096,cross_entropy-liger-full-memory-V16384}.json; do
        s=$(date +%s)
        python3 -m kirunner "$j" --out "$work/selfrun/$(basename "$j")" >> "$log" 2>&1
        echo "=== selfrun $(basename "$j") rc=$? wall_s=$(( $(date +%s) - s ))" >> "$log"
      done ;;
    *) echo "device.sh: unknown phase $phase" >> "$log" ;;
  esac
done
kill "$smi"
echo "=== total wall_s=$(( $(date +%s) - t0 ))" >> "$log"
tar -C "$work" -czf "$out/fidelity.tar.gz" .

#!/usr/bin/env bash
# Re-measure every job of a batch folder on the GPU host: one runner process per repeat runs
# every job (process start, imports and Triton compilation dominate a short job), signed.
#
#   bench/h200/run.sh --jobs data/reruns/h200-2026-11-30/jobs --key-file .whl/worker.env
#   bench/h200/run.sh --dry-run                  # here, on the CPU, to test the script
#
# Options:
#   --jobs DIR          job folder (default bench/h200/jobs; --dry-run: bench/h200/examples)
#   --key-file FILE     lines KERNELINDEX_WORKER_KEY_ID=... and KERNELINDEX_WORKER_KEY=...
#                       (read, never sourced); required unless --unsigned or --dry-run
#   --unsigned          run without signing (results then cannot be imported as attested)
#   --out DIR           where results.tar.gz, run.log and env.txt go (default $OUT, else
#                       bench/out/<mode>)
#   --work DIR          where result files accumulate (default bench/out/work): a second call
#                       on the same host keeps what the first finished and runs the rest
#   --repeats N         independent runner processes over the batch (default 2); repeats
#                       after the first take its latency jobs only; <job>.rN.json is repeat N
#   --limit N           only the first N jobs (by name); --dry-run defaults to 4
#   --budget S          start no job after S seconds in all (default 540: the device allows
#                       600 per command)
#   --python EXE        interpreter (default python3; --dry-run: .venv/bin/python if present)
#   --cache DIR         the compile caches, DIR/triton and DIR/inductor (default: a folder
#                       under $TMPDIR). A later call on a fresh host that brings the same
#                       folder back compiles nothing it compiled before: the same kernels,
#                       loaded instead of built, so nothing measured changes
#   --refused FILE      kernel/pass captures that tainted a process of an earlier batch
#                       (lines "kernel/pass<TAB>batch/job"): profiled here from the first job,
#                       rather than costing this batch a process and a device time each.
#                       The batch's own refusals are appended to FILE at the end
#
# Jobs are grouped by the liger-kernel release they ask for: one Python process can import
# one release only, so each group runs in its own process.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo" || exit 2

mode=device
jobs_dir=""
key_file=""
unsigned=0
out_dir="${OUT:-}"
work_dir=""
repeats=2
limit=""
budget=540
python=""
cache=""
refused=""

while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) mode=dry-run ;;
    --jobs) jobs_dir="$2"; shift ;;
    --key-file) key_file="$2"; shift ;;
    --unsigned) unsigned=1 ;;
    --out) out_dir="$2"; shift ;;
    --work) work_dir="$2"; shift ;;
    --repeats) repeats="$2"; shift ;;
    --limit) limit="$2"; shift ;;
    --budget) budget="$2"; shift ;;
    --python) python="$2"; shift ;;
    --cache) cache="$2"; shift ;;
    --refused) refused="$2"; shift ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

t0=$(date +%s)
if [ "$mode" = dry-run ]; then
  jobs_dir="${jobs_dir:-bench/h200/examples}"
  limit="${limit:-4}"
  [ -n "$out_dir" ] || out_dir="bench/out/dry-run"
  work_dir="${work_dir:-bench/out/dry-run-work}"
  if [ -z "$python" ]; then
    if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
  fi
else
  jobs_dir="${jobs_dir:-bench/h200/jobs}"
  [ -n "$out_dir" ] || out_dir="bench/out/h200"
  python="${python:-python3}"
fi
work_dir="${work_dir:-bench/out/work}"
mkdir -p "$out_dir" "$work_dir/results" "$work_dir/logs"
out_dir="$(cd "$out_dir" && pwd)"
work_dir="$(cd "$work_dir" && pwd)"
log="$out_dir/run.log"
: > "$log"
say() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$log"; }

# A capture that fails part-way fails again in a fresh process (docs/runner.md), so what an
# earlier batch learnt holds here: take its refusals whose kernel/pass this batch lacks.
refused_here="$work_dir/results/capture-refused.txt"
if [ -n "$refused" ] && [ -s "$refused" ]; then
  touch "$refused_here"
  while IFS=$'\t' read -r key by; do
    grep -q "^$key"$'\t' "$refused_here" || printf '%s\t%s\n' "$key" "$by" >> "$refused_here"
  done < "$refused"
fi

shopt -s nullglob
jobs=("$jobs_dir"/*.json)
if [ ${#jobs[@]} -eq 0 ]; then
  say "no jobs in $jobs_dir"; exit 2
fi
if [ -n "$limit" ] && [ "$limit" -lt ${#jobs[@]} ]; then
  jobs=("${jobs[@]:0:$limit}")
fi

# --- signing key: read the two values, export them for kirunner -----------------------
sign_args=(--sign)
if [ "$unsigned" = 1 ]; then
  sign_args=()
  say "signing: OFF (--unsigned)"
elif [ -n "$key_file" ]; then
  [ -r "$key_file" ] || { say "key file $key_file is not readable"; exit 2; }
  KERNELINDEX_WORKER_KEY_ID="$(sed -n 's/^KERNELINDEX_WORKER_KEY_ID=//p' "$key_file" | head -n1 | tr -d '\r')"
  KERNELINDEX_WORKER_KEY="$(sed -n 's/^KERNELINDEX_WORKER_KEY=//p' "$key_file" | head -n1 | tr -d '\r')"
  if [ -z "$KERNELINDEX_WORKER_KEY_ID" ] || [ -z "$KERNELINDEX_WORKER_KEY" ]; then
    say "key file must hold KERNELINDEX_WORKER_KEY_ID=... and KERNELINDEX_WORKER_KEY=..."; exit 2
  fi
  export KERNELINDEX_WORKER_KEY_ID KERNELINDEX_WORKER_KEY
  say "signing: key id $KERNELINDEX_WORKER_KEY_ID"
elif [ "$mode" = dry-run ]; then
  # A throwaway key: the dry run proves signing works, its results are worth nothing.
  KERNELINDEX_WORKER_KEY_ID="dry-run-throwaway"
  KERNELINDEX_WORKER_KEY="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  export KERNELINDEX_WORKER_KEY_ID KERNELINDEX_WORKER_KEY
  say "signing: throwaway dry-run key"
else
  say "no --key-file given (use --unsigned to run without signing)"; exit 2
fi

# --- wheels: each liger-kernel release in its own folder, the rest on PYTHONPATH --------
wheels="${TMPDIR:-/tmp}/kirun-wheels"
mkdir -p "$wheels/liger" "$wheels/site"
for whl in .whl/*.whl; do
  base="$(basename "$whl")"
  case "$base" in
    liger_kernel-*)
      ver="${base#liger_kernel-}"; ver="${ver%%-*}"
      [ -d "$wheels/liger/$ver" ] || "$python" -m pip install -q --no-index --no-deps \
          --no-compile --no-cache-dir --target "$wheels/liger/$ver" "$whl" >>"$log" 2>&1 ;;
    *) "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
          --upgrade --target "$wheels/site" "$whl" >>"$log" 2>&1 ;;
  esac
done
export PYTHONPATH="$repo:$wheels/site${PYTHONPATH:+:$PYTHONPATH}"
cache="${cache:-$wheels/compile-cache}"
mkdir -p "$cache/triton" "$cache/inductor"
export KIRUNNER_LIGER_ROOT="$wheels/liger" TRITON_CACHE_DIR="$cache/triton" \
  TORCHINDUCTOR_CACHE_DIR="$cache/inductor"
export PYTHONUNBUFFERED=1

run_args=()
if [ "$mode" = dry-run ]; then run_args=(--cpu --rep 5); fi

{
  echo "mode: $mode"
  echo "jobs: ${#jobs[@]} in $jobs_dir; repeats: $repeats; budget: ${budget}s"
  echo "python: $("$python" -c 'import sys; print(sys.version.split()[0], sys.executable)')"
  "$python" -m pip list 2>/dev/null | grep -iE '^(torch|triton|transformers|liger|numpy|nvidia-ml-py) ' || true
  echo "liger releases: $(ls "$wheels/liger" | tr '\n' ' ')"
  echo "compile cache: $(find "$cache" -type f | wc -l) files in $cache at the start"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,temperature.gpu,power.limit --format=csv
} > "$out_dir/env.txt" 2>&1
say "$(tr '\n' ';' < "$out_dir/env.txt")"

# --- groups by requested release, then one process per group and repeat ----------------
mapfile -t groups < <("$python" - "${jobs[@]}" <<'PY'
import json, sys
from collections import defaultdict
sys.path.insert(0, ".")
from kirunner.runner import validate_job
groups = defaultdict(list)
for path in sys.argv[1:]:
    groups[validate_job(json.load(open(path)))["revision"]].append(path)
for paths in groups.values():
    print(" ".join(paths))
PY
)
for r in $(seq 1 "$repeats"); do
  for group in "${groups[@]}"; do
    left=$(( budget - ($(date +%s) - t0) ))
    if [ "$left" -lt 20 ]; then say "repeat $r: no time left (${left}s)"; continue; fi
    # Exit 75: a job left the process unfit for another; a new process resumes the group.
    rc=75
    while [ "$rc" -eq 75 ] && [ "$left" -ge 20 ]; do
      # Later repeats take the jobs in a fixed shuffled order, so a repeat that runs out of
      # time still covers every kernel rather than the first few by name.
      # They re-measure latency jobs only: a verdict on a latency cell needs a second
      # independent process, while a peak-memory reading repeats to the byte.
      order="$group"
      if [ "$r" -gt 1 ]; then
        order="$(tr ' ' '\n' <<< "$group" | grep -- '-latency-' \
          | shuf --random-source=<(yes "$r") | tr '\n' ' ')"
        [ -n "$order" ] || break
      fi
      # shellcheck disable=SC2086
      timeout --kill-after=10 "$left" "$python" -m kirunner batch $order \
        --out-dir "$work_dir/results" --suffix ".r$r" --budget $(( left - 15 )) \
        "${sign_args[@]}" "${run_args[@]}" >> "$work_dir/logs/batch.r$r.log" 2>&1
      rc=$?
      say "repeat $r, group of $(wc -w <<< "$group") jobs: rc=$rc $(tail -n1 "$work_dir/logs/batch.r$r.log")"
      left=$(( budget - ($(date +%s) - t0) ))
    done
  done
done

if [ -n "$refused" ] && [ -s "$refused_here" ]; then
  batch="$(basename "$(cd "$jobs_dir/.." && pwd)")"
  touch "$refused"
  while IFS=$'\t' read -r key by; do
    grep -q "^$key"$'\t' "$refused" || printf '%s\t%s/%s\n' "$key" "$batch" "$by" >> "$refused"
  done < "$refused_here"
fi
cp "$log" "$work_dir/logs/run-$(date +%s).log"
tar -czf "$out_dir/results.tar.gz" -C "$work_dir" results logs
say "results: $(ls "$work_dir/results" | wc -l) files; wrote $out_dir/results.tar.gz ($(du -k "$out_dir/results.tar.gz" | cut -f1) KiB)"

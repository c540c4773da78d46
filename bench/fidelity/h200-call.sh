#!/usr/bin/env bash
# H200 call: Liger-Kernel's benchmark scripts at 02bac05, unchanged, one after the other.
set -u
call="$1"; deadline="$2"; shift 2
t0=$(date +%s); out="${OUT:-/tmp/out}"; mkdir -p "$out/$call"
for k in "$@"; do
  left=$(( deadline - ($(date +%s) - t0) ))
  [ "$left" -lt 40 ] && { echo "$k: not started (${left}s left)" >> "$out/$call/device.log"; continue; }
  s=$(date +%s)
  UPSTREAM_SRC="$PWD/.upstream/liger-02bac05" UPSTREAM_TAG=02bac05 OUT="$out/$call/upstream-$k" \
    timeout --kill-after=5 $(( left - 10 )) bash bench/fidelity/upstream.sh "$k"
  echo "$k: rc=$? wall_s=$(( $(date +%s) - s )) rows=$(( $(wc -l < "$out/$call/upstream-$k/upstream.csv" 2>/dev/null || echo 1) - 1 ))" >> "$out/$call/device.log"
done
nvidia-smi -q > "$out/$call/smi-after.txt" 2>&1

#!/usr/bin/env bash
# One device call over the batch's jobs: .whl/drive.sh CALL BUDGET
# Resumes from bench/out/work (same host) and from .whl/prev (earlier calls' results, when
# the host is a fresh one); writes one archive, $OUT/results.tar.gz (results and logs).
set -u
call="$1"; budget="$2"
export PYTHONUNBUFFERED=1
W=bench/out/work; J=data/reruns/h200-2026-12-03/jobs
mkdir -p "$W/results" "$W/logs" "/tmp/o/$call"
t0=$(date +%s)
log="$W/logs/$call-call.log"
say() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$log"; }
say "call $call: $(date -u +%FT%TZ) host $(hostname), budget ${budget}s, jobs in $J: $(ls $J | wc -l)"
before=$(ls "$W/results" | wc -l)
if compgen -G ".whl/prev/*.json" >/dev/null; then cp -n .whl/prev/*.json "$W/results/"; fi
say "results on this host: $before; with earlier calls' results: $(ls "$W/results" | wc -l)"
nvidia-smi -q > "$W/logs/$call-smi-before.txt" 2>&1
nvidia-smi dmon -s pc -o T > "$W/logs/$call-dmon.txt" 2>&1 &
dpid=$!
bench/h200/run.sh --jobs "$J" --key-file .whl/worker.env --repeats 1 --budget "$budget" \
  --out "/tmp/o/$call" >> "$log" 2>&1
say "run.sh rc=$?"
kill "$dpid" 2>/dev/null; wait "$dpid" 2>/dev/null
nvidia-smi -q > "$W/logs/$call-smi-after.txt" 2>&1
cp "/tmp/o/$call/env.txt" "$W/logs/$call-env.txt" 2>/dev/null
say "results now: $(ls "$W/results" | wc -l); done $(date -u +%FT%TZ)"
tar -czf "${OUT:-/tmp/o}/results.tar.gz" -C "$W" results logs

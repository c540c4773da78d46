#!/usr/bin/env bash
# One device call over one or more batches: .whl/drive.sh CALL BUDGET BATCH[:REPEATS[:JOBS]]...
# (JOBS: a folder of some of the batch's job files, default data/reruns/BATCH/jobs)
# Each batch resumes from its committed results (data/reruns/<b>/results -> <job>.r1.json,
# repeats/ as they are); capture refusals that earlier batches learnt are brought in
# (run.sh --refused); compile caches are shared by the batches of the call (--cache).
# Writes $OUT/results.tar.gz (every batch's work folder and the call's logs).
set -u
call="$1"; budget="$2"; shift 2
export PYTHONUNBUFFERED=1
W=bench/out/work; C=/tmp/kicache; mkdir -p "$W/calls" "$C"
t0=$(date +%s)
log="$W/calls/$call-call.log"
say() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$log"; }
say "call $call: $(date -u +%FT%TZ) host $(hostname), budget ${budget}s, batches: $*"
# Earlier batches' refusals, qualified batch/job.
for f in .whl/refused-seed.txt data/reruns/*/logs/*capture-refused.txt; do
  b=$(basename "$(dirname "$(dirname "$f")")")
  while IFS=$'\t' read -r key by; do
    case "$by" in */*) q="$by" ;; *) q="$b/$by" ;; esac
    grep -q "^$key"$'\t' "$C/capture-refused.txt" 2>/dev/null || printf '%s\t%s\n' "$key" "$q" >> "$C/capture-refused.txt"
  done < "$f"
done
say "refusals brought in: $(wc -l < "$C/capture-refused.txt" 2>/dev/null)"
nvidia-smi -q > "$W/calls/$call-smi-before.txt" 2>&1
nvidia-smi dmon -s pc -o T > "$W/calls/$call-dmon.txt" 2>&1 &
dpid=$!
for spec in "$@"; do
  IFS=: read -r b r jd <<< "$spec"; r="${r:-1}"; jd="${jd:-data/reruns/$b/jobs}"
  bw="$W/$b"; mkdir -p "$bw/results" "$bw/logs"
  for f in data/reruns/$b/results/*.json; do
    t="$bw/results/$(basename "${f%.json}").r1.json"; [ -e "$f" ] && [ ! -e "$t" ] && cp "$f" "$t"
  done
  for f in data/reruns/$b/repeats/*.json; do
    [ -e "$f" ] && [ ! -e "$bw/results/$(basename "$f")" ] && cp "$f" "$bw/results/"
  done
  left=$(( budget - ($(date +%s) - t0) ))
  say "$b: start, jobs $jd, repeats $r, ${left}s left, results brought: $(ls "$bw/results" | wc -l)"
  if [ "$left" -lt 30 ]; then say "$b: no time left"; continue; fi
  bench/h200/run.sh --jobs "$jd" --key-file .whl/worker.env --repeats "$r" \
    --budget "$left" --work "$bw" --cache "$C" --refused "$C/capture-refused.txt" \
    --out "/tmp/o/$call/$b" >> "$log" 2>&1
  say "$b: run.sh rc=$?, results now $(ls "$bw/results" | wc -l)"
done
kill "$dpid" 2>/dev/null; wait "$dpid" 2>/dev/null
nvidia-smi -q > "$W/calls/$call-smi-after.txt" 2>&1
cp "$C/capture-refused.txt" "$W/calls/$call-capture-refused.txt" 2>/dev/null
say "done $(date -u +%FT%TZ)"
tar -czf "${OUT:-/tmp/o}/results.tar.gz" -C bench/out work

#!/usr/bin/env bash
# One device call on the lent H100: the served runner wheel installed as a user would, the
# batch's jobs in runner processes (bench/h200/run.sh, resumable), and Liger-Kernel's own
# benchmark scripts at the batch's commit, one after the other on the same host.
#
#   bash bench/h100/device.sh CALL DEADLINE_S PHASE...
#
# PHASE is one of
#   reproduce           bench/reproduce-gpu: a fresh virtual environment, `pip install` of the
#                       wheel the site served (.whl/reproduce/), `kirunner --help` and
#                       `kirunner run` of each job file downloaded from a run page
#   upstream:K1,K2,...  benchmark_<K>.py of the upstream source (.upstream/liger-$UPSTREAM_COMMIT,
#                       ab7fe2a unless the environment names another commit),
#                       unchanged (bench/fidelity/upstream.sh), each script's rows kept
#   batch:R:GROUP[:S]   bench/h200/run.sh over .whl/h100-jobs/GROUP, R runner processes
#                       (repeats), for S seconds at most and not past DEADLINE_S
# in the order given. PHASE@NAME runs the phase with the wheels of .whl/overlay/NAME/ (e.g. an
# older transformers and the tokenizers / huggingface_hub it requires) installed, --no-deps, into
# a folder of their own on the host, or with .whl/overlay/NAME.tar.xz unpacked there (the same
# wheels' files, unpacked and xz-compressed where the wheels would not fit the carry), and that
# folder put on PYTHONPATH ahead of the image's site-packages:
# upstream.sh puts it after the upstream src (UPSTREAM_PYTHONPATH), bench/h200/run.sh after the
# runner and its wheels. A script whose imports the image's packages no longer have runs
# unchanged under the release its CI had; the runner's jobs of the same kernel can see the same.
# Carried (ignored) folders: .whl (wheels, jobs, worker.env, prev.tar.gz:
# the results of earlier calls, so a fresh host resumes) and .upstream/liger-<commit>.
# Writes $OUT/CALL.tar.gz (results, runner logs, the scripts' CSVs and logs, nvidia-smi
# sampling) and $OUT/device-CALL.log.
set -u
call="$1"; deadline="$2"; shift 2
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo" || exit 2
export PYTHONUNBUFFERED=1
t0=$(date +%s)
out="${OUT:-/tmp/out}"; mkdir -p "$out"
W=bench/out/work; keep="/tmp/keep/$call"
mkdir -p "$W/results" "$W/logs" "$keep"
log="$out/device-$call.log"
say() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$log"; }
say "call $call $(date -u +%FT%TZ) host $(hostname) deadline ${deadline}s phases: $*"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv
  python3 -c "import sys, torch, triton, transformers; print(sys.version.split()[0], torch.__version__, torch.version.cuda, triton.__version__, transformers.__version__)"
  nproc; lscpu | grep -m1 'Model name'
} >> "$log" 2>&1
if [ -f .whl/prev.tar.gz ]; then tar -xzf .whl/prev.tar.gz -C "$W" --skip-old-files; fi
say "results carried from earlier calls: $(ls "$W/results" | wc -l)"
nvidia-smi -q > "$keep/smi-before.txt" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active,pstate \
  --format=csv -lms 250 > "$keep/smi.csv" 2>&1 &
smi=$!

# Liger-Kernel at the batch's commit as utils.py expects an installed checkout: its src on the
# path and a dist-info naming the version the checkout declares (pyproject.toml: 0.7.0 at
# ab7fe2a, 0.6.5 at 1fdb668).
commit="${UPSTREAM_COMMIT:-ab7fe2a}"
up=".upstream/liger-$commit"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$up/pyproject.toml" 2>/dev/null | head -1)"
if [ -d "$up/src" ] && [ ! -d "$up/src/liger_kernel-${version:-0.7.0}.dist-info" ]; then
  mkdir -p "$up/src/liger_kernel-${version:-0.7.0}.dist-info"
  printf 'Metadata-Version: 2.1\nName: liger_kernel\nVersion: %s\n' "${version:-0.7.0}" \
    > "$up/src/liger_kernel-${version:-0.7.0}.dist-info/METADATA"
fi

# Captures that tainted a process in an earlier call (.whl/capture-refused.txt, the union of the
# batch's logs/*-capture-refused.txt) are profiled from the first job instead of costing a
# fresh process each.
refused=""; [ -s .whl/capture-refused.txt ] && refused=.whl/capture-refused.txt

overlay() {  # NAME -> the folder its wheels are installed in (once a host)
  local dir="/tmp/overlay/$1"
  if [ ! -d "$dir" ] && [ -f ".whl/overlay/$1.tar.xz" ]; then
    mkdir -p "$dir" && tar -xJf ".whl/overlay/$1.tar.xz" -C "$dir"
  elif [ ! -d "$dir" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$dir" .whl/overlay/"$1"/*.whl >> "$log" 2>&1
  fi
  say "overlay $1: $(PYTHONPATH="$dir" python3 -c 'import transformers, tokenizers, huggingface_hub as h; print("transformers", transformers.__version__, "tokenizers", tokenizers.__version__, "huggingface_hub", h.__version__)' 2>&1 | tail -1)"
  echo "$dir"
}

for phase in "$@"; do
  left=$(( deadline - ($(date +%s) - t0) ))
  if [ "$left" -lt 25 ]; then say "$phase: not started (${left}s left)"; continue; fi
  ov=""
  case "$phase" in *@*) ov="$(overlay "${phase#*@}" | tail -1)"; phase="${phase%@*}" ;; esac
  case "$phase" in
    reproduce)
      s=$(date +%s)
      say "reproduce: start"
      OUT="$keep/reproduce" bash bench/reproduce-gpu/walk.sh >> "$log" 2>&1
      say "reproduce: rc=$? wall_s=$(( $(date +%s) - s ))" ;;
    upstream:*)
      for k in $(tr ',' ' ' <<< "${phase#upstream:}"); do
        left=$(( deadline - ($(date +%s) - t0) ))
        if [ "$left" -lt 40 ]; then say "upstream $k: not started (${left}s left)"; continue; fi
        s=$(date +%s)
        UPSTREAM_SRC="$repo/$up" UPSTREAM_TAG="$commit" OUT="$keep/upstream-$k" UPSTREAM_PYTHONPATH="$ov" \
          timeout --kill-after=5 $(( left - 10 )) bash bench/fidelity/upstream.sh "$k"
        say "upstream $k: rc=$? wall_s=$(( $(date +%s) - s )) rows=$(( $(wc -l < "$keep/upstream-$k/upstream.csv" 2>/dev/null || echo 1) - 1 ))"
      done ;;
    batch:*)
      IFS=: read -r _ reps group cap <<< "$phase"
      if [ -n "${cap:-}" ] && [ "$cap" -lt "$left" ]; then left="$cap"; fi
      s=$(date +%s); before=$(ls "$W/results" | wc -l)
      say "batch $group: start, repeats $reps, budget ${left}s"
      PYTHONPATH="$ov" bench/h200/run.sh --jobs ".whl/h100-jobs/$group" --key-file .whl/worker.env \
        --repeats "$reps" --budget "$left" --work "$W" --out "$keep/run-$group" \
        ${refused:+--refused "$refused"} >> "$log" 2>&1
      say "batch $group: rc=$? wall_s=$(( $(date +%s) - s )) results $before -> $(ls "$W/results" | wc -l)"
      cp "$keep/run-$group/run.log" "$W/logs/$call-run-$group.log" 2>/dev/null ;;
    *) say "unknown phase $phase" ;;
  esac
done
kill "$smi" 2>/dev/null
nvidia-smi -q > "$keep/smi-after.txt" 2>&1
say "done $(date -u +%FT%TZ) total_s=$(( $(date +%s) - t0 ))"
cp "$log" "$keep/"
tar -czf "$out/$call.tar.gz" -C "$W" results logs -C "$keep" .
ls -la "$out"

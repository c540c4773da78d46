#!/usr/bin/env bash
# Re-measure every job in bench/h200/jobs/*.json on the GPU host, 3 times each, signed.
#
#   bench/h200/run.sh --key-file .whl/worker.env            # on the H200 (device tool)
#   bench/h200/run.sh --dry-run                              # here, on the CPU, to test the script
#
# Options:
#   --jobs DIR          job folder (default bench/h200/jobs; --dry-run: bench/h200/examples)
#   --key-file FILE     lines KERNELINDEX_WORKER_KEY_ID=... and KERNELINDEX_WORKER_KEY=...
#                       (read, never sourced); required unless --unsigned or --dry-run
#   --unsigned          run without signing (results then cannot be imported as attested)
#   --out DIR           output folder (default $OUT on the device, else bench/out/<mode>)
#   --repeats N         runs per job (default 3); file <job>.r1.json is the primary
#   --limit N           only the first N jobs (by name); --dry-run defaults to 4
#   --budget S          stop starting runs after S seconds in all (default 500: the device
#                       allows 600 per command, and wheel install + packing need the rest)
#   --run-timeout S     kill one run after S seconds (default 120)
#   --python EXE        interpreter (default python3; --dry-run: .venv/bin/python if present)
#
# What comes back from the device is at most 8 files, so everything is packed into
# $OUT/results.tar.gz (result JSONs + per-run logs) beside $OUT/run.log, $OUT/summary.json
# and $OUT/env.txt.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo" || exit 2

mode=device
jobs_dir=""
key_file=""
unsigned=0
out_dir="${OUT:-}"
repeats=3
limit=""
budget=500
run_timeout=120
python=""

while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) mode=dry-run ;;
    --jobs) jobs_dir="$2"; shift ;;
    --key-file) key_file="$2"; shift ;;
    --unsigned) unsigned=1 ;;
    --out) out_dir="$2"; shift ;;
    --repeats) repeats="$2"; shift ;;
    --limit) limit="$2"; shift ;;
    --budget) budget="$2"; shift ;;
    --run-timeout) run_timeout="$2"; shift ;;
    --python) python="$2"; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

t0=$(date +%s)
if [ "$mode" = dry-run ]; then
  jobs_dir="${jobs_dir:-bench/h200/examples}"
  limit="${limit:-4}"
  [ -n "$out_dir" ] || out_dir="bench/out/dry-run"
  if [ -z "$python" ]; then
    if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
  fi
else
  jobs_dir="${jobs_dir:-bench/h200/jobs}"
  [ -n "$out_dir" ] || out_dir="bench/out/h200"
  python="${python:-python3}"
fi
mkdir -p "$out_dir"
out_dir="$(cd "$out_dir" && pwd)"
log="$out_dir/run.log"
: > "$log"
say() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$log"; }

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
work="${TMPDIR:-/tmp}/kirun.$$"
mkdir -p "$work/liger" "$work/site" "$work/results" "$work/logs"
export TRITON_CACHE_DIR="$work/triton-cache" PYTHONUNBUFFERED=1
others=()
for whl in .whl/*.whl; do
  base="$(basename "$whl")"
  case "$base" in
    liger_kernel-*)
      ver="${base#liger_kernel-}"; ver="${ver%%-*}"
      if "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
          --target "$work/liger/$ver" "$whl" >>"$log" 2>&1; then
        say "installed liger-kernel $ver"
      else
        say "FAILED to install $base"
      fi ;;
    *) others+=("$whl") ;;
  esac
done
if [ ${#others[@]} -gt 0 ]; then
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$work/site" "${others[@]}" >>"$log" 2>&1 && say "installed ${#others[@]} other wheel(s)"
  export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export KIRUNNER_LIGER_ROOT="$work/liger"
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"

run_args=()
if [ "$mode" = dry-run ]; then run_args=(--cpu --rep 5); fi

{
  echo "mode: $mode"
  echo "jobs: ${#jobs[@]} in $jobs_dir; repeats: $repeats; budget: ${budget}s; run timeout: ${run_timeout}s"
  echo "python: $("$python" -c 'import sys; print(sys.version.split()[0], sys.executable)')"
  "$python" -m pip list 2>/dev/null | grep -iE '^(torch|triton|transformers|liger|numpy) ' || true
  echo "liger releases: $(ls "$work/liger" | tr '\n' ' ')"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,temperature.gpu,power.limit --format=csv
} > "$out_dir/env.txt" 2>&1
say "$(tr '\n' ';' < "$out_dir/env.txt")"

# --- the runs: round r runs every job once, so all primaries (r1) finish first ----------
slowest=20   # seconds; grows to the slowest run seen, to decide whether another fits
n_ok=0; n_fail=0; n_skip=0
for r in $(seq 1 "$repeats"); do
  for job in "${jobs[@]}"; do
    name="$(basename "$job" .json)"
    elapsed=$(( $(date +%s) - t0 ))
    left=$(( budget - elapsed ))
    if [ "$left" -lt $(( slowest + 5 )) ]; then
      say "SKIP $name.r$r: ${left}s left, slowest run so far ${slowest}s"
      n_skip=$((n_skip + 1)); continue
    fi
    limit=$(( left < run_timeout ? left : run_timeout ))
    res="$work/results/$name.r$r.json"
    s=$(date +%s)
    timeout --kill-after=10 "$limit" "$python" -m kirunner "$job" --out "$res" \
      "${sign_args[@]}" "${run_args[@]}" > "$work/logs/$name.r$r.log" 2>&1
    rc=$?
    d=$(( $(date +%s) - s ))
    [ "$d" -gt "$slowest" ] && slowest=$d
    line="$(grep -E '^(ok|incorrect|unavailable|invalid|error|dev-interpreter):' "$work/logs/$name.r$r.log" | tail -n1)"
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
      say "TIMEOUT $name.r$r after ${d}s (limit ${limit}s)"; n_fail=$((n_fail + 1))
    elif [ -f "$res" ]; then
      say "$name.r$r rc=$rc ${d}s $line"
      if [ "$rc" -eq 0 ]; then n_ok=$((n_ok + 1)); else n_fail=$((n_fail + 1)); fi
    else
      say "NO RESULT $name.r$r rc=$rc ${d}s: $(tail -n 3 "$work/logs/$name.r$r.log" | tr '\n' ' ')"
      n_fail=$((n_fail + 1))
    fi
  done
done
say "runs: $n_ok ok, $n_fail not ok, $n_skip skipped"

# --- summary and packing ------------------------------------------------------------------
"$python" - "$work/results" "$out_dir/summary.json" <<'PY' >>"$log" 2>&1
import json, pathlib, re, statistics, sys
src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
jobs = {}
for f in sorted(src.glob("*.r*.json")):
    m = re.match(r"(.+)\.r(\d+)\.json$", f.name)
    p = json.loads(f.read_text())["payload"]
    meas = p.get("measurement") or {}
    jobs.setdefault(m.group(1), []).append({
        "file": f.name, "repeat": int(m.group(2)), "status": p.get("status"),
        "correct": (p.get("correctness") or {}).get("passed"),
        "median": meas.get("median"), "p20": meas.get("p20"), "p80": meas.get("p80"),
        "unit": meas.get("unit"), "n": meas.get("iterations"),
        "used": (p.get("implementation") or {}).get("usedRevision"),
        "error": (p.get("error") or "").splitlines()[0] if p.get("error") else None,
    })
summary = {}
for name, runs in jobs.items():
    runs.sort(key=lambda r: r["repeat"])
    medians = [r["median"] for r in runs if isinstance(r["median"], (int, float))]
    entry = {"primary": runs[0]["file"], "runs": runs}
    if len(medians) >= 2 and statistics.mean(medians) > 0:
        entry["spreadOfMedians"] = (max(medians) - min(medians)) / statistics.mean(medians)
    summary[name] = entry
dst.write_text(json.dumps(summary, indent=2) + "\n")
for name, e in summary.items():
    meds = ", ".join(f"{r['median']:.5g}" if r["median"] is not None else str(r["status"]) for r in e["runs"])
    print(f"{name}: {meds} {e['runs'][0]['unit'] or ''} spread={e.get('spreadOfMedians')}")
PY
tail -n $(( ${#jobs[@]} + 1 )) "$log"
cp "$log" "$work/logs/run.log"
tar -czf "$out_dir/results.tar.gz" -C "$work" results logs
say "wrote $out_dir/results.tar.gz ($(du -k "$out_dir/results.tar.gz" | cut -f1) KiB), summary.json, env.txt, run.log"
rm -rf "$work"
[ "$n_ok" -gt 0 ]

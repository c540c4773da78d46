#!/usr/bin/env bash
# Install the runner from the site's zip and the job's liger-kernel release (offline: wheels
# carried in whl/), then run each job file downloaded from its run page.
set -uo pipefail
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
q="name,driver_version,pstate,temperature.gpu,power.draw,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,clocks_throttle_reasons.active,utilization.gpu,memory.used"
nvidia-smi --query-gpu=$q --format=csv > "$OUT/gpu-state.csv" 2>&1
python3 -m pip install --no-index --find-links whl "kirunner[gpu] @ file://$PWD/kirunner-0.1.0.zip" liger-kernel==0.6.0 > "$OUT/install.log" 2>&1
echo "pip exit $?" >> "$OUT/install.log"
python3 -m pip show kirunner liger-kernel torch triton transformers nvidia-ml-py >> "$OUT/install.log" 2>&1
command -v kirunner >> "$OUT/install.log"
kirunner --version
for id in f459ed2b 708302df 8827e3bb; do
  echo "== job-$id" | tee -a "$OUT/run.log"
  kirunner run "jobs/job-$id.json" --out "$OUT/result-$id.json" 2>&1 | tee -a "$OUT/run.log"
  echo "exit ${PIPESTATUS[0]}" | tee -a "$OUT/run.log"
  nvidia-smi --query-gpu=$q --format=csv,noheader >> "$OUT/gpu-state.csv" 2>&1
done

#!/usr/bin/env bash
# A run page's "Reproduce on your GPU" steps on a GPU host without network access
# (bench/reproduce-gpu/README.md): the same commands, with the two changes that host needs.
#   1. `python3 -m venv --system-site-packages` plus a .pth file naming the image's
#      site-packages: torch, triton, transformers and nvidia-ml-py come from the host's image
#      (itself a virtual environment), since pip cannot download them here.
#   2. pip resolves from local files (`--no-index --find-links .whl`): the runner wheel the
#      site served (.whl/reproduce/, its SHA-256 checked by pip against the page's digest),
#      the runner's pure-Python needs (rfc8785, jsonschema and its own) and the liger-kernel
#      0.7.0 wheel built from Liger-Kernel at ab7fe2a (the rows' commit).
# The job files are the ones downloaded from the run pages (the page's `curl` step, done on
# the machine that served the site): bench/reproduce-gpu/jobs/.
set -u
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${OUT:-/tmp/reproduce}"
mkdir -p "$out"
cd "$out" || exit 2
wheel="$(ls "$repo"/.whl/reproduce/kirunner-*.whl)"
digest="$(cat "$repo/.whl/reproduce/SHA256")"
echo "\$ sha256sum $(basename "$wheel")"; sha256sum "$wheel"
echo "\$ python3 -m venv --system-site-packages kirunner-env && . kirunner-env/bin/activate"
if ! python3 -m venv --system-site-packages kirunner-env; then
  # An image without ensurepip: the same venv, with the image's pip run inside it.
  echo "venv with pip failed; python3 -m venv --without-pip --system-site-packages kirunner-env"
  rm -rf kirunner-env; python3 -m venv --without-pip --system-site-packages kirunner-env || exit 3
fi
# The image's torch lives in a virtual environment of its own (/opt/torch/.venv), which
# --system-site-packages does not reach: a .pth file puts its site-packages on the new
# environment's path, as the system site would be.
image_site="$(python3 -c 'import site; print(site.getsitepackages()[0])')"
env_site="$(kirunner-env/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$image_site" > "$env_site/image-site.pth"
echo "(image site-packages $image_site added to $env_site through image-site.pth)"
. kirunner-env/bin/activate || exit 3
pip() { python -m pip "$@"; }
cmd=(pip install --no-index --find-links "$repo/.whl" --find-links "$repo/.whl/reproduce"
     "kirunner[gpu] @ file://$wheel#sha256=$digest" "liger-kernel==0.7.0")
echo "\$ ${cmd[*]}"; "${cmd[@]}" 2>&1 | tail -n 5
echo "\$ pip show kirunner liger-kernel"; pip show kirunner liger-kernel 2>&1 | grep -E '^(Name|Version|Location)'
echo "\$ kirunner --help"; kirunner --help 2>&1 | head -n 40
for job in "$repo"/bench/reproduce-gpu/jobs/job-*.json; do
  name="$(basename "$job")"; id="${name#job-}"; id="${id%.json}"
  cp "$job" "$name"
  s=$(date +%s.%N)
  echo "\$ kirunner run $name --out result-$id.json"
  kirunner run "$name" --out "result-$id.json" 2>&1 | tail -n 15
  echo "rc=${PIPESTATUS[0]} wall_s=$(python3 -c "print(round($(date +%s.%N) - $s, 1))")"
done
rm -rf kirunner-env

#!/usr/bin/env bash
# Prepare what a device call of bench/h100/device.sh carries (all of it ignored by git):
#   .upstream/liger-COMMIT   Liger-Kernel's src, benchmark, pyproject.toml and the tests its
#                            scripts import, at COMMIT (default ab7fe2a; `git archive` of a
#                            checkout of github.com/linkedin/Liger-Kernel)
#   .whl/liger_kernel-VERSION-py3-none-any.whl
#                            a wheel of exactly that src (every file, folders without
#                            __init__.py included: ops/experimental), named with the version the
#                            checkout's pyproject.toml declares (0.7.0 at ab7fe2a, 0.6.5 at
#                            1fdb668); no release matches either commit
#   .whl/*.whl               the runner's pure-Python needs for the GPU host's Python 3.12
#                            (rfc8785, jsonschema and what it needs), which its image lacks
#   .whl/worker.env          the batch's public demo signing key (data/reruns/<batch>/worker-key.json)
#
#   bash bench/h100/prepare.sh /path/to/Liger-Kernel.git data/reruns/h100-2026-12-05 [COMMIT]
set -euo pipefail
git_dir="$1"; batch="$2"; commit="${3:-ab7fe2a}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
up=".upstream/liger-$commit"
rm -rf "$up" && mkdir -p "$up" .whl
git -C "$git_dir" archive "$commit" src benchmark pyproject.toml test/__init__.py test/utils.py \
  test/transformers test/chunked_loss | tar -x -C "$up"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$up/pyproject.toml" | head -1)"
python3 - "$up/src" .whl "$version" <<'PY'
import base64, hashlib, sys, zipfile
from pathlib import Path
src, out = Path(sys.argv[1]), Path(sys.argv[2])
name, ver = "liger_kernel", sys.argv[3]
info = f"{name}-{ver}.dist-info"
files = sorted(p for p in (src / name).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
meta = {
    f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n",
    f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: bench/h100/prepare.sh\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    f"{info}/top_level.txt": f"{name}\n",
}
record = []
def digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
with zipfile.ZipFile(out / f"{name}-{ver}-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as whl:
    for p in files:
        arc = p.relative_to(src).as_posix(); data = p.read_bytes()
        whl.writestr(arc, data); record.append(f"{arc},{digest(data)},{len(data)}")
    for arc, text in meta.items():
        data = text.encode(); whl.writestr(arc, data); record.append(f"{arc},{digest(data)},{len(data)}")
    record.append(f"{info}/RECORD,,")
    whl.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
print(f"{len(files)} files in {name}-{ver}")
PY
plat=()
for p in manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64; do plat+=(--platform "$p"); done
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" \
  -d .whl rfc8785 jsonschema
python3 - "$batch/worker-key.json" > .whl/worker.env <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"KERNELINDEX_WORKER_KEY_ID={d['keyId']}\nKERNELINDEX_WORKER_KEY={d['secret']}")
PY
ls -la .whl

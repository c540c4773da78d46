"""The correctness tolerance Liger-Kernel's own tests set, per kernel and dtype, at a commit.

    python bench/upstream_test_tolerance.py --git-dir PATH/TO/Liger-Kernel/.git [--commit 02bac05] \
        [--write]

Reads each test file named in KERNELS at the commit (`git show`, no checkout), finds the test
function's `@pytest.mark.parametrize("... dtype, atol, rtol ...", [...])` and takes the entry of
each dtype: atol, rtol and the line it is written on. Upstream's tests compare with
`assert_verbose_allclose` (test/utils.py): |a - b| <= atol + rtol * |b| elementwise, b the
reference. The server judges a controlled rerun's float64 errors against these numbers
(runs/evidence_correctness.py); where a kernel has no upstream test at the commit, the runner's
own criterion stands. Prints the table; --write stores it as
data/tolerance/upstream-tests/<commit>.json, one table per commit a publication names (the
tests change between commits: ab7fe2a adds kernels and their tests that 02bac05 lacks).
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path

# Runner kernel -> (test file, test function, {runner output name: (atol arg, rtol arg)}).
# The function is the test of the module or function the runner calls for that kernel; a dtype
# that test does not cover is taken from the same file's functional test (FUNCTIONAL_FALLBACK).
KERNELS: dict[str, tuple[str, str, dict[str, tuple[str, str]]]] = {
    "cross_entropy": ("test/transformers/test_cross_entropy.py", "test_correctness", {}),
    "distill_cosine_loss": ("test/chunked_loss/test_cosine_loss.py", "test_correctness", {}),
    "distill_jsd_loss": ("test/chunked_loss/test_jsd_loss.py", "test_correctness", {}),
    "dpo_loss": ("test/chunked_loss/test_dpo_loss.py", "test_correctness", {}),
    "embedding": ("test/transformers/test_embedding.py", "test_embedding_correctness", {}),
    "fused_add_rms_norm": ("test/transformers/test_fused_add_rms_norm.py", "test_correctness", {}),
    "dyt_beta=False": (
        "test/transformers/test_dyt.py",
        "test_liger_dyt_correctness",
        {"grad_alpha": ("alpha_atol", "alpha_rtol")},
    ),
    "dyt_beta=True": (
        "test/transformers/test_dyt.py",
        "test_liger_dyt_correctness",
        {"grad_alpha": ("alpha_atol", "alpha_rtol")},
    ),
    "fused_linear_cpo_loss": ("test/chunked_loss/test_cpo_loss.py", "test_correctness", {}),
    "fused_linear_cross_entropy": (
        "test/transformers/test_fused_linear_cross_entropy.py",
        "test_correctness",
        {},
    ),
    "fused_linear_jsd": ("test/transformers/test_fused_linear_jsd.py", "test_correctness", {}),
    "fused_linear_simpo_loss": ("test/chunked_loss/test_simpo_loss.py", "test_correctness", {}),
    "fused_neighborhood_attention": (
        "test/transformers/test_fused_neighborhood_attention.py",
        "test_fused_neighborhood_attention_correctness",
        {},
    ),
    "geglu": ("test/transformers/test_geglu.py", "test_correctness", {}),
    "group_norm": ("test/transformers/test_group_norm.py", "test_liger_group_norm", {}),
    "jsd": ("test/transformers/test_jsd.py", "test_correctness", {}),
    "kl_div": ("test/transformers/test_kl_div.py", "test_correctness", {}),
    "kto_loss": ("test/chunked_loss/test_kto_loss.py", "test_correctness", {}),
    "layer_norm": ("test/transformers/test_layer_norm.py", "test_liger_layer_norm", {}),
    "multi_token_attention": (
        "test/transformers/test_multi_token_attention.py",
        "test_multi_token_attention_correctness",
        {},
    ),
    "poly_norm": ("test/transformers/test_poly_norm.py", "test_correctness", {}),
    "qwen2vl_mrope": ("test/transformers/test_qwen2vl_mrope.py", "test_correctness", {}),
    "rms_norm": ("test/transformers/test_rms_norm.py", "test_correctness", {}),
    "rope": ("test/transformers/test_rope.py", "test_correctness", {}),
    "softmax": ("test/transformers/test_softmax.py", "test_liger_softmax", {}),
    "sparse_multi_token_attention": (
        "test/transformers/test_multi_token_attention.py",
        "test_sparse_multi_token_attention_correctness",
        {},
    ),
    "sparsemax": (
        "test/transformers/test_sparsemax.py",
        "test_liger_sparsemax_correctness",
        {},
    ),
    "swiglu": ("test/transformers/test_swiglu.py", "test_correctness_llamamlp", {}),
    "tiled_geglu": ("test/transformers/test_tiled_mlp.py", "test_tiled_geglu_correctness", {}),
    "tiled_swiglu": ("test/transformers/test_tiled_mlp.py", "test_tiled_swiglu_correctness", {}),
    "tvd": ("test/transformers/test_tvd.py", "test_correctness", {}),
}
# mhc_*: test_mhc.py names its tolerances per output (pre_post_tol, res_tol, grad_tol), not
# atol/rtol, in module-level lists; not read here, so the runner's own criterion stands for them.
TABLES = Path(__file__).resolve().parent.parent / "data" / "tolerance" / "upstream-tests"
# test_dyt.py's module test covers fp32 only; its functional test, of the same kernel, bf16.
FUNCTIONAL_FALLBACK = {"test_liger_dyt_correctness": "test_liger_dyt_functional"}
DTYPES = {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16"}
# fused_linear_cross_entropy's test parametrizes the reduction too; the runner uses "mean".
REDUCTION = "mean"


def _show(git_dir: str, commit: str, path: str) -> str:
    """The file at the commit; empty where the commit has no such file (a test added later)."""
    out = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"],
        capture_output=True,
        text=True,
    )
    return out.stdout if out.returncode == 0 else ""


def _value(node: ast.AST):
    if isinstance(node, ast.Attribute):
        return ast.unparse(node)
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)


def _entries(source: str, function: str) -> list[tuple[int, dict]]:
    """(line, {argument: value}) of each row of the function's atol/rtol parametrize."""
    tree = ast.parse(source)
    named = {
        n.targets[0].id: n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
    }
    for fn in tree.body:
        if not (isinstance(fn, ast.FunctionDef) and fn.name == function):
            continue
        for dec in fn.decorator_list:
            if not (isinstance(dec, ast.Call) and ast.unparse(dec.func).endswith("parametrize")):
                continue
            args = dec.args
            if args and isinstance(args[0], ast.Starred):  # parametrize(*_DTYPE_PARAMS)
                args = named[args[0].value.id].elts
            if not (args and isinstance(args[0], ast.Constant) and "atol" in args[0].value):
                continue
            names = [s.strip() for s in args[0].value.split(",")]
            rows = []
            for row in args[1].elts:
                values = row.args if isinstance(row, ast.Call) else row.elts  # pytest.param(...)
                rows.append((row.lineno, dict(zip(names, map(_value, values), strict=False))))
            return rows
    return []


def table(git_dir: str, commit: str) -> dict:
    kernels: dict[str, dict] = {}
    for kernel, (path, function, outputs) in sorted(KERNELS.items()):
        source = _show(git_dir, commit, path)
        found: dict[str, dict] = {}
        if not source:
            continue
        for fn in (function, FUNCTIONAL_FALLBACK.get(function)):
            if fn is None:
                continue
            for line, row in _entries(source, fn):
                dtype = DTYPES.get(row.get("dtype"))
                if dtype is None or dtype in found or row.get("reduction", REDUCTION) != REDUCTION:
                    continue
                entry = {
                    "atol": float(row["atol"]),
                    "rtol": float(row["rtol"]),
                    "file": path,
                    "test": fn,
                    "line": line,
                }
                over = {
                    name: {"atol": float(row[a]), "rtol": float(row[r])}
                    for name, (a, r) in outputs.items()
                    if a in row and r in row
                }
                if over:
                    entry["outputs"] = over
                found[dtype] = entry
        kernels[kernel] = found
    return {
        "upstream": "https://github.com/linkedin/Liger-Kernel",
        "commit": commit,
        "criterion": "|impl - ref| <= atol + rtol * |ref| elementwise (test/utils.py "
        "assert_verbose_allclose)",
        "kernels": kernels,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git-dir", required=True)
    parser.add_argument("--commit", default="02bac05")
    parser.add_argument("--write", action="store_true", help="store it under " + str(TABLES))
    args = parser.parse_args(argv)
    full = subprocess.run(
        ["git", f"--git-dir={args.git_dir}", "rev-parse", args.commit],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    data = table(args.git_dir, full[:7])
    for kernel, dtypes in data["kernels"].items():
        for dtype, e in sorted(dtypes.items()):
            print(f"{kernel:32} {dtype:5} atol {e['atol']:<8g} rtol {e['rtol']:<8g} "
                  f"{e['file']}:{e['line']} ({e['test']})")  # fmt: skip
    if args.write:
        TABLES.mkdir(parents=True, exist_ok=True)
        (TABLES / f"{data['commit']}.json").write_text(
            json.dumps(data, indent=1, sort_keys=True) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

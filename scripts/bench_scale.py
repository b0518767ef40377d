"""(e) scale: the sgemm rate, the sweep's referees (r), an older revision's sweep, and
(f) the referees under each of TF's CPU kernel sets (scripts/bench.py --only e, r, f).
The cross-check overhead and the Ray engine's scaling, also part of (e), are in
scripts/bench_crosscheck.py and scripts/bench_ray.py."""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from bench_common import PY, json_line, timed
from bench_crosscheck import crosscheck_overhead
from bench_ray import ray_scaling


def sgemm_rate(n: int = 1024, repeats: int = 5) -> float:
    """GFLOP/s of a float32 n x n matmul (numpy's BLAS, all its threads), best of runs."""
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    b = a.T.copy()
    a @ b
    best = min(timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def scale(spec: str, texts: list[str], n_cross: int, n_ray: int, baseline_ref: str | None) -> None:
    print(f"\n(e) scale, {spec}")
    rate = sgemm_rate()
    print(f"    sgemm (numpy float32 1024^3, best of 5): {rate:.1f} GFLOP/s")
    sweep_referees(spec, rate)
    if baseline_ref:
        sweep_against(spec, baseline_ref)
    crosscheck_overhead(spec, texts, n_cross)
    ray_scaling(spec, texts, n_ray)


def sweep_referees(spec: str, rate: float) -> None:
    """The sweep (embeds + cross-check) on the repo corpus under --referee full and lazy,
    alternated (the machine drifts), with its useful FLOP rate as a share of sgemm."""
    from tfparity.adapters.reference.pt_model import load_pt
    from tfparity.sweep import DEFAULT_CORPUS, SweepOptions, run_sweep

    pt = load_pt(spec)
    params = sum(p.numel() for n, p in pt.model.named_parameters() if "embeddings" not in n)
    with tempfile.TemporaryDirectory(prefix="tfparity-bench-") as tmp:
        rates, verdicts = {}, {}
        for mode in ("full", "lazy", "full", "lazy"):
            options = SweepOptions(
                checks=("embeds", "crosscheck"), progress="none", overwrite=True, referee=mode
            )
            result = run_sweep(spec, DEFAULT_CORPUS, Path(tmp) / mode, options)
            run = result.summary["run"]
            rates.setdefault(mode, []).append(run["items_per_second"])
            records = list(map(json_line, (Path(tmp) / mode / "results.jsonl").open()))
            verdicts.setdefault(mode, {r["index"]: r["passed"] for r in records})
            tokens = sum(record["tokens"] for record in records)
            fp64_items = run["referee"]["items_fp64"]
            # useful work: 2 x non-embedding parameters x real tokens per pass; TF ids,
            # TF embeds, PyTorch fp32 (+ float64 on its share of the items)
            share64 = fp64_items / max(run["items_this_run"], 1)
            flops = 2 * params * tokens * (3 + share64)
            print(
                f"    sweep --referee {mode}: {run['items_per_second']} items/s, float64 for "
                f"{fp64_items}/{run['items_this_run']} items, {flops / run['seconds'] / 1e9:.1f} "
                f"GFLOP/s useful = {flops / run['seconds'] / 1e9 / rate:.0%} of sgemm"
            )
        full, lazy = statistics.median(rates["full"]), statistics.median(rates["lazy"])
        print(f"    lazy / full items/s: {lazy / full:.2f}x (medians of 2)")
        differ = sorted(i for i, v in verdicts["full"].items() if verdicts["lazy"].get(i) != v)
        same = "identical" if not differ else f"DIFFERENT for items {differ[:10]}"
        print(f"    verdicts, lazy vs full: {same} on {len(verdicts['full'])} items")


def kernels(spec: str) -> None:
    """The sweep's referees under both of TF's CPU kernel sets, each in a child process
    (TF reads TF_ENABLE_ONEDNN_OPTS at import): the lazy referee's float64 share must
    not depend on how TF's kernels round."""
    print(f"\n(f) kernels, {spec}: the sweep's referees under each of TF's CPU kernel sets")
    for label, value in (("oneDNN (TF's default)", "1"), ("Eigen (TF_ENABLE_ONEDNN_OPTS=0)", "0")):
        env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS=value)
        cmd = [PY, str(Path(__file__).with_name("bench.py")), "--only", "r", "--model", spec]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
        print(f"  {label}:")
        print("\n".join(line for line in out.splitlines() if line.startswith("    ")))


SWEEP_SCRIPT = """
import json, sys
from tfparity.sweep import DEFAULT_CORPUS, SweepOptions, run_sweep
options = SweepOptions(checks=("embeds", "crosscheck"), progress="none", overwrite=True)
result = run_sweep(sys.argv[1], DEFAULT_CORPUS, sys.argv[2], options)
print("RESULT", json.dumps(result.summary["run"]["items_per_second"]))
"""


def sweep_against(spec: str, ref: str) -> None:
    """The sweep (embeds + cross-check, default options) of git revision ``ref`` against
    this tree's, each in a fresh process on the repo corpus, alternated; verdicts compared
    item by item."""
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="tfparity-bench-") as tmp:
        old = Path(tmp) / "ref"
        subprocess.run(
            ["git", "-C", str(root), "worktree", "add", "--detach", "-q", str(old), ref],
            check=True,
        )
        try:
            trees, rates = {"ref": old, "now": root}, {}
            for label in ("ref", "now", "ref", "now"):
                out = Path(tmp) / label
                env = {**os.environ, "PYTHONPATH": str(trees[label])}
                line = subprocess.run(  # cwd: not this tree, which `-c` would put first
                    [PY, "-c", SWEEP_SCRIPT, spec, str(out)],
                    cwd=tmp,
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                rates.setdefault(label, []).append(float(line.split("RESULT")[-1]))
            verdicts = {
                label: {
                    r["index"]: (r["passed"], {c: x["passed"] for c, x in r["checks"].items()})
                    for r in map(json_line, (Path(tmp) / label / "results.jsonl").open())
                }
                for label in trees
            }
        finally:
            subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(old)])
    ref_rate, now_rate = statistics.median(rates["ref"]), statistics.median(rates["now"])
    same = verdicts["ref"] == verdicts["now"]
    print(
        f"    sweep of {ref} (fresh process): {ref_rate:.2f} items/s; this tree: "
        f"{now_rate:.2f} items/s: {now_rate / ref_rate:.2f}x (medians of 2; goal >= 1.5x); "
        f"verdicts {'identical' if same else 'DIFFERENT'} on {len(verdicts['now'])} items"
    )

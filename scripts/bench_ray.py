"""The Ray engine on 1 vs 2 local workers and the machine's ceiling for that ratio,
part of (e) (scripts/bench.py --only e)."""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from bench_common import PY, TFPARITY, corpus_file

CEILING_SCRIPT = """
import time, numpy as np
a = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
a @ a
start = time.perf_counter()
for _ in range(300):
    a @ a
print(time.perf_counter() - start)
"""


def parallel_ceiling() -> float:
    """What 2 single-threaded processes get done together against one alone (float32
    matmuls, OpenBLAS held to one thread): the machine's own ceiling for 2 workers of
    one thread, below 2x where the cores are shared with other tenants."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}

    def run(n: int) -> float:
        procs = [
            subprocess.Popen([PY, "-c", CEILING_SCRIPT], env=env, stdout=subprocess.PIPE, text=True)
            for _ in range(n)
        ]
        return max(float(p.communicate()[0]) for p in procs)

    ratios = [2 * run(1) / run(2) for _ in range(3)]
    return statistics.median(ratios)


def ray_scaling(spec: str, texts: list[str], n_ray: int) -> None:
    """`tfparity sweep --engine ray` on 1 and 2 local workers of one CPU thread each,
    alternated, each a fresh command as a user runs it (a driver inside this process,
    which holds the other sections' models, measured 1.45x where fresh ones gave 1.63x).
    980 items by default: each worker's fixed start (its two traces and its float64
    calibration batch, ~3 s single-threaded) is then a smaller share of the run, as on
    the large corpora the engine is for."""
    import json

    with tempfile.TemporaryDirectory(prefix="tfparity-bench-") as tmp:
        corpus = corpus_file(texts, n_ray, Path(tmp))
        rates: dict[int, list[float]] = {}
        for workers in (1, 2, 1, 2):
            out = Path(tmp) / f"w{workers}"
            command = [*TFPARITY, "sweep", spec, "--texts", str(corpus), "--out", str(out)]
            command += ["--checks", "embeds,crosscheck", "--progress", "none", "--overwrite"]
            command += ["--engine", "ray", "--workers", str(workers), "--cpus-per-worker", "1"]
            subprocess.run(command, cwd=tmp, capture_output=True, check=True)
            run = json.loads((out / "summary.json").read_text())["run"]
            rates.setdefault(workers, []).append(run["items_per_second"])
            print(
                f"    Ray engine, {workers} local worker(s), 1 CPU thread each: "
                f"{run['items_per_second']} items/s ({n_ray} items, loading excluded)"
            )
        one, two = statistics.median(rates[1]), statistics.median(rates[2])
        print(f"    2 workers / 1 worker: {two / one:.2f}x  (goal >= 1.6x; medians of 2)")
    print(
        f"    the machine's own ceiling: 2 single-threaded processes do {parallel_ceiling():.2f}x "
        "the work of one in the same time (matmuls, median of 3)"
    )

"""(t) What ``tfparity backends`` costs against the bare per-backend processes (issue 32's
goal: at most 1.3x), on a tiny keras-hub model (keras-hub:tiny:bert, --random 2
--seq-len 8).

The bare processes: a hand-written script per backend (python started with
KERAS_BACKEND set, keras and keras_hub imported, the same converted .keras loaded, one
forward pass), all started at once, the wall time until the last ends. Against them,
per round and alternated:

- ``tfparity backends keras-hub:tiny:bert``: the whole command (every backend's
  process started first; the TensorFlow one converts the checkpoint and runs HF
  PyTorch's float64 reference, then every process runs the file; then the judging);
- the same with ``--jobs 3``: every backend's process at once, as the bare ones (the
  default now too);
- ``tfparity backends FILE.keras --import keras_hub --inputs --jobs 3``: the same
  converted file and inputs, so the conversion and HF's run are left out: what the
  backend processes cost beyond the bare ones (the recording model, the float64 twin,
  the judging).

The ratio is taken per round. The conversion is done once beforehand, for the bare
processes and the second command.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BARE = """
import sys, numpy as np, keras, keras_hub
held = np.load(sys.argv[2])
model = keras.saving.load_model(sys.argv[1], compile=False)
model({k.split(":", 1)[1]: held[k] for k in held.files}, training=False)
"""


def _environment(backend: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    env.update(KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore")
    return env


def _convert(spec: str, directory: Path) -> tuple[Path, Path, Path]:
    """The spec converted once (tfparity's own preparing step, on TensorFlow): the
    .keras file, its inputs by name (the bare scripts) and in order (--inputs)."""
    out = directory / "prepared"
    given = json.dumps({"random": 2, "seq_len": 8, "seed": 0, "texts": None})
    subprocess.run(
        [sys.executable, "-m", "tfparity.cross_backend.prepare", "keras-hub", spec]
        + ["--out", str(out), "--given", given],
        env=_environment("tensorflow"),
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import numpy as np

    meta = json.loads(Path(f"{out}.json").read_text())
    with np.load(f"{out}.npz") as held:
        named = {f"input:{n}": held[f"input:{n}"] for n in meta["inputs"]}
    np.savez(directory / "named.npz", **named)
    np.savez(directory / "ordered.npz", *named.values())
    return Path(f"{out}.keras"), directory / "named.npz", directory / "ordered.npz"


def _bare(model: Path, named: Path, backends: list[str]) -> float:
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", BARE, str(model), str(named)],
            env=_environment(b),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for b in backends
    ]
    for b, proc in zip(backends, procs, strict=True):
        _, err = proc.communicate()
        if proc.returncode:
            raise RuntimeError(f"bare {b} failed: {err.decode()[-400:]}")
    return time.perf_counter() - start


def _tfparity(arguments: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "tfparity", "backends", *arguments],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"tfparity backends failed: {proc.stdout[-400:]}{proc.stderr[-400:]}")
    return time.perf_counter() - start


def backends_overhead(spec: str = "keras-hub:tiny:bert", rounds: int = 3) -> None:
    backends = ["tensorflow", "jax", "torch"]
    with tempfile.TemporaryDirectory(prefix="tfparity-bench-backends-") as tmp:
        model, named, ordered = _convert(spec, Path(tmp))
        every = ["--jobs", str(len(backends))]  # as the bare processes: all at once
        runs = {
            "bare processes": lambda: _bare(model, named, backends),
            "tfparity backends SPEC": lambda: _tfparity([spec, "--random", "2", "--seq-len", "8"]),
            "tfparity backends SPEC --jobs 3": lambda: _tfparity(
                [spec, "--random", "2", "--seq-len", "8", *every]
            ),
            "tfparity backends FILE --jobs 3": lambda: _tfparity(
                [str(model), "--import", "keras_hub", "--inputs", str(ordered), *every]
            ),
        }
        times: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(rounds):
            for label, fn in runs.items():
                times[label].append(fn())
    bare = times["bare processes"]
    print(
        f"\n(t) tfparity backends, {spec} --random 2 --seq-len 8, backends "
        f"{', '.join(backends)}, {rounds} rounds, {os.cpu_count()} CPUs"
    )
    print(f"  bare per-backend processes (started at once) {statistics.median(bare):.1f} s")
    for label in list(times)[1:]:
        ratios = [t / b for t, b in zip(times[label], bare, strict=True)]
        print(
            f"  {label} {statistics.median(times[label]):.1f} s: "
            f"{statistics.median(ratios):.2f}x the bare processes (goal <= 1.3x; rounds "
            + ", ".join(f"{r:.2f}x" for r in ratios)
            + ")"
        )


if __name__ == "__main__":
    backends_overhead(rounds=int(sys.argv[1]) if len(sys.argv) > 1 else 3)

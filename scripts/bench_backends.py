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
processes and the second command. Beside the wall time, each run's CPU time (user +
system of every process it started and waited for, from ``getrusage``): on a machine
shared with other work the wall time follows the load (the bare processes took 23 s on
a quiet 2-core machine and 118 s on one at load 12), the CPU time much less, so its
ratio says what tfparity adds to the bare processes' work when the wall time cannot.
"""

from __future__ import annotations

import json
import os
import resource
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


class Timed:
    """One run's wall time and CPU time (its waited-for processes' user + system)."""

    def __enter__(self) -> Timed:
        self.cpu0, self.wall0 = _children_cpu(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = _children_cpu() - self.cpu0


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _bare(model: Path, named: Path, backends: list[str]) -> Timed:
    with Timed() as timed:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", BARE, str(model), str(named)],
                env=_environment(b),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for b in backends
        ]
        errors = [(b, *proc.communicate()) for b, proc in zip(backends, procs, strict=True)]
    for (b, _, err), proc in zip(errors, procs, strict=True):
        if proc.returncode:
            raise RuntimeError(f"bare {b} failed: {err.decode()[-400:]}")
    return timed


def _tfparity(arguments: list[str]) -> Timed:
    with Timed() as timed:
        proc = subprocess.run(
            [sys.executable, "-m", "tfparity", "backends", *arguments],
            capture_output=True,
            text=True,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"tfparity backends failed: {proc.stdout[-400:]}{proc.stderr[-400:]}")
    return timed


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
        times: dict[str, list[Timed]] = {k: [] for k in runs}
        for _ in range(rounds):
            for label, fn in runs.items():
                times[label].append(fn())
    bare = times["bare processes"]
    print(
        f"\n(t) tfparity backends, {spec} --random 2 --seq-len 8, backends "
        f"{', '.join(backends)}, {rounds} rounds, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(
        f"  bare per-backend processes (started at once) "
        f"{statistics.median(t.wall for t in bare):.1f} s, "
        f"CPU {statistics.median(t.cpu for t in bare):.1f} s"
    )
    for label in list(times)[1:]:
        walls = [t.wall / b.wall for t, b in zip(times[label], bare, strict=True)]
        cpus = [t.cpu / b.cpu for t, b in zip(times[label], bare, strict=True)]
        print(
            f"  {label} {statistics.median(t.wall for t in times[label]):.1f} s: "
            f"{statistics.median(walls):.2f}x the bare processes (goal <= 1.3x; rounds "
            + ", ".join(f"{r:.2f}x" for r in walls)
            + f"); CPU {statistics.median(t.cpu for t in times[label]):.1f} s: "
            f"{statistics.median(cpus):.2f}x (rounds " + ", ".join(f"{r:.2f}x" for r in cpus) + ")"
        )


if __name__ == "__main__":
    backends_overhead(rounds=int(sys.argv[1]) if len(sys.argv) > 1 else 3)

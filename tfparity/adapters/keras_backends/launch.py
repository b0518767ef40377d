"""Run one ``.keras`` file on every Keras backend asked for, one process each, on the same
inputs, and read back what each recorded (framework-free: the parent imports no
backend).

Each process is a serving :mod:`.worker` with ``KERAS_BACKEND`` set (:mod:`.workers`:
started early or reused where the caller holds a :class:`~.workers.BackendWorkers`); they run
side by side (each is mostly start-up and imports). The
float64 referee runs in the process of its backend when that backend is also checked
(one start-up fewer), else in a process of its own.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import TfparityError
from .workers import REQUEST_TIMEOUT_S, WORKER, BackendWorkers, ServingWorker, WorkerKey

# Keras 3's backends, in the order a report lists them; each with the module it needs
# and the pip command that installs it.
BACKENDS = ("tensorflow", "jax", "torch")
_MODULES = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}
_PIP = {
    "tensorflow": "pip install tensorflow",
    "jax": "pip install 'tfparity[jax]'",
    "torch": "pip install 'tfparity[torch]'",
}
# The referee's backend: TensorFlow, the one on which Keras 3 computes float64 as asked
# (:func:`.worker.float64_shortfalls`; a worker asked for float64 on another probes it
# and refuses). JAX gets x64 switched on at start-up when asked.
DEFAULT_REFEREE = "tensorflow"
WORKER_TIMEOUT_S = REQUEST_TIMEOUT_S


def installed(backend: str) -> bool:
    """Whether ``backend``'s framework can be imported (looked up, not imported)."""
    return importlib.util.find_spec(_MODULES[backend]) is not None


def pip_command(backend: str) -> str:
    """The command that installs ``backend``."""
    return _PIP[backend]


@dataclass(frozen=True)
class LaunchPlan:
    """Which processes to start: the float32 backends and the referee's backend."""

    model: Path
    backends: tuple[str, ...]
    referee: str
    imports: tuple[str, ...] = ()
    gradients: int | None = None  # the seed of the scalar differentiated; None: none
    # False for a Keras-quantised file: its int8/float8 layers have no float64 twin
    # (their kernels and scales are not a float model's weights), so none is asked for.
    float64: bool = True
    entry: str = WORKER  # the module the processes serve (:data:`.workers.WORKER`)

    def key(self, backend: str) -> WorkerKey:
        """The serving process ``backend``'s run needs (:class:`.workers.WorkerKey`)."""
        return WorkerKey.of(backend, self.processes()[backend], self.imports, self.entry)

    def processes(self) -> dict[str, tuple[str, ...]]:
        """Per backend, the precisions its process runs (float64 on the referee's)."""
        plan: dict[str, tuple[str, ...]] = {b: ("float32",) for b in self.backends}
        if self.float64:
            plan[self.referee] = (*plan.get(self.referee, ()), "float64")
        return plan


@dataclass
class BackendRun:
    """What one backend's process recorded: per precision, each layer's output by name
    (topological order), plus its precision facts and notes; with gradients, per
    precision each gradient by row name (reverse topological order) and the facts that
    place the rows in the model (:func:`.gradients.record_gradients`)."""

    backend: str
    outputs: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    precision: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    keras_version: str = ""
    gradients: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    gradient_facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    layer_facts: dict[str, dict[str, Any]] = field(default_factory=dict)  # see worker
    # Each sublayer tap's graph layer (``block/attention/query`` -> ``block``): taps are
    # the outputs of the layers inside a graph layer (:mod:`.sublayers`).
    parents: dict[str, str] = field(default_factory=dict)


def default_jobs(processes: int) -> int:
    """Every process at once. Each spends most of its life importing and then waits for
    the prepared file, so a process held back waits for a slot and then imports on the
    critical path: on 2 cores, all three at once took 25.5 s against 27.6 s for two at a
    time (docs/benchmarks.md (t)). ``--jobs`` caps it where memory is short."""
    return max(1, processes)


def run_backends(
    plan: LaunchPlan,
    inputs: list[np.ndarray],
    jobs: int | None = None,
    workers: BackendWorkers | None = None,
) -> dict[str, BackendRun]:
    """Run every process of ``plan`` on ``inputs``, at most ``jobs`` at once (default
    :func:`default_jobs`; 1: one after another), in serving processes taken from
    ``workers`` (warm ones where it holds them; None: started here, ended at the end);
    each backend's run. A process that fails (a bad file, a custom layer not imported)
    is a TfparityError naming the backend and the worker's one-paragraph reason."""
    processes = plan.processes()
    jobs = default_jobs(len(processes)) if jobs is None else jobs
    if jobs < 1:
        raise TfparityError(f"--jobs must be at least 1, not {jobs}.")
    with contextlib.ExitStack() as stack:
        pool = workers if workers is not None else stack.enter_context(BackendWorkers())
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tfparity-backends-")))
        given = tmp / "inputs.npz"
        np.savez(given, **{f"input_{k}": a for k, a in enumerate(inputs)})

        def start(b: str) -> ServingWorker:
            worker = pool.take(plan.key(b))
            worker.submit(_request(plan, processes[b], given, tmp / f"{b}.npz"))
            return worker

        def collected(b: str, worker: ServingWorker) -> BackendRun:
            try:
                worker.wait(WORKER_TIMEOUT_S)
            finally:  # one that answered, even an error, serves the next run
                if worker.poll() is None:
                    pool.give_back(worker)
            return read_run(b, tmp / f"{b}.npz")

        return scheduled(list(processes), jobs, start, collected)


def warm_first(workers: BackendWorkers, plan: LaunchPlan, jobs: int | None) -> None:
    """Start the processes ``plan`` runs first (as many as ``jobs`` lets run at once),
    before its file exists: they import while the caller prepares it."""
    names = list(plan.processes())
    workers.warm([plan.key(b) for b in names[: default_jobs(len(names)) if jobs is None else jobs]])


def scheduled(
    names: list[str],
    jobs: int,
    start: Callable[[str], Any],
    collect: Callable[[str, Any], BackendRun],
) -> dict[str, BackendRun]:
    """Start ``names`` in order, at most ``jobs`` running at once: when the oldest
    running one is collected, the next starts. Collecting in start order keeps the
    first failure reported the same whatever ``jobs`` is. A failure ends the others
    (their processes are killed: what they were doing is not waited for)."""
    waiting, running, runs = list(names), [], {}
    try:
        while waiting or running:
            while waiting and len(running) < jobs:
                name = waiting.pop(0)
                running.append((name, start(name)))
            name, proc = running.pop(0)
            runs[name] = collect(name, proc)
    finally:
        for _, proc in running:  # after a failure: nothing left behind
            if proc.poll() is None:
                proc.kill()
    return {name: runs[name] for name in names}


def _request(plan: LaunchPlan, precisions: tuple[str, ...], given: Path, out: Path) -> dict:
    """One run's arguments, as :func:`.worker.serve` reads them."""
    return {
        "model": str(plan.model),
        "inputs": str(given),
        "out": str(out),
        "precision": list(precisions),
        "gradients": plan.gradients,
    }


def read_run(backend: str, out: Path) -> BackendRun:
    """What ``backend``'s process wrote to ``out``; a TfparityError naming the backend
    and the worker's one-paragraph reason where it could not run."""
    meta_path = Path(f"{out}.json")
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    if "error" in meta or not meta:
        why = meta.get("error") or "it wrote nothing"
        raise TfparityError(f"the {backend} backend could not run the model: {why}")
    run = BackendRun(backend, precision=meta["precision"], keras_version=meta["keras"])
    run.layer_facts = meta.get("layer_facts", {})
    with np.load(out) as held:
        for precision, facts in meta["runs"].items():
            run.outputs[precision] = {n: held[f"{precision}:{n}"] for n in facts["layers"]}
            run.notes.extend(facts["notes"])
            run.parents.update(facts.get("parents", {}))
            if "gradients" in facts:
                rows = facts["gradients"]["rows"]
                run.gradients[precision] = {n: held[f"grad:{precision}:{n}"] for n in rows}
                run.gradient_facts[precision] = facts["gradients"]
    return run


def choose_backends(asked: Sequence[str] | None) -> tuple[tuple[str, ...], list[str]]:
    """The backends to run and a note per one skipped. ``asked`` None: every installed
    one (each missing one skipped with its pip command); an unknown name, or one asked
    for but not installed, is a TfparityError naming the pip command."""
    if asked is not None:
        unknown = [b for b in asked if b not in BACKENDS]
        if unknown or not asked:
            raise TfparityError(
                f"unknown backend(s) {', '.join(unknown) or '(none given)'}: --backends takes a "
                f"comma-separated list of {', '.join(BACKENDS)}."
            )
        missing = [b for b in asked if not installed(b)]
        if missing:
            raise TfparityError(
                "; ".join(f"backend {b} is not installed: {pip_command(b)}" for b in missing) + "."
            )
        return tuple(dict.fromkeys(asked)), []
    chosen = tuple(b for b in BACKENDS if installed(b))
    notes = [
        f"backend {b} skipped: not installed ({pip_command(b)})"
        for b in BACKENDS
        if b not in chosen
    ]
    if not chosen:
        raise TfparityError("no Keras backend is installed: pip install tensorflow.")
    return chosen, notes


def choose_referee(asked: str | None) -> str:
    """The backend that runs the float64 referee: ``asked``, else
    :data:`DEFAULT_REFEREE` (whose process refuses a backend that cannot compute float64
    as asked)."""
    if asked is not None:
        if asked not in BACKENDS:
            raise TfparityError(f"unknown referee backend {asked}: one of {', '.join(BACKENDS)}.")
        if not installed(asked):
            raise TfparityError(f"referee backend {asked} is not installed: {pip_command(asked)}.")
        return asked
    if not installed(DEFAULT_REFEREE):
        raise TfparityError(
            f"the float64 referee runs on {DEFAULT_REFEREE}, which is not installed: "
            f"{pip_command(DEFAULT_REFEREE)}."
        )
    return DEFAULT_REFEREE

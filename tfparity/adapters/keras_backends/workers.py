"""Warm backend processes: each a :mod:`.worker` started in serving mode, importing Keras
on its backend before it is asked anything, and reusable.

A backend's process spends most of its life importing (TensorFlow, JAX or torch, then
Keras, then keras-hub). Started first, the imports overlap with whatever the parent
does meanwhile (converting a keras-hub checkpoint, running Hugging Face's reference);
kept, they are paid once for many models (a test session checking several files:
``tfparity.backends(..., workers=w)``, or the ``tfparity_backend_workers`` fixture of
the pytest plugin).

A process is only reused for what it was started as (:class:`WorkerKey`): its backend,
JAX's x64 switch (read at start-up) and the modules it imported (a custom layer
registered by one model's import must not make another model's missing import pass).
Each run starts from Keras's defaults (:func:`.worker.serve`).

One :class:`ServingWorker` serves every use: the pooled runs of ``tfparity backends``
and the keras-hub side on another backend (``--backend jax|torch``,
:mod:`tfparity.adapters.keras_hub.remote`), so a request fails, runs past its deadline
and ends the same way for both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import TfparityError
from .protocol import Lines


def environment(backend: str, precisions: tuple[str, ...]) -> dict[str, str]:
    """The environment of a process on ``backend`` (quiet, this tfparity importable)."""
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}  # Keras 3 here
    env.update(KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH")) if p)
    if backend == "jax" and "float64" in precisions:
        env["JAX_ENABLE_X64"] = "1"  # else JAX computes float64 requests in float32
    return env


def _package_root() -> str:
    """The directory holding this tfparity, so the worker imports the same one."""
    return str(Path(__file__).resolve().parents[3])


# The module a serving process runs (``python -m``): this package's worker, or a caller's
# module that serves the same protocol and more kinds of request (the preparing step's,
# :mod:`tfparity.cross_backend.prepare`, which converts a model in the TensorFlow
# backend's own process).
WORKER = "tfparity.adapters.keras_backends.worker"
# How long a request may take before its process is killed: a conversion, a first run
# (XLA compiling on JAX) or a generation on a slow CPU take minutes, a hang for ever.
REQUEST_TIMEOUT_S = 600


@dataclass(frozen=True)
class WorkerKey:
    """What a serving process was started as; runs with another key need another one."""

    backend: str
    precisions: tuple[str, ...]  # float64 on JAX needs x64 switched on at start-up
    imports: tuple[str, ...]
    entry: str = WORKER

    @classmethod
    def of(
        cls,
        backend: str,
        precisions: tuple[str, ...],
        imports: tuple[str, ...],
        entry: str = WORKER,
    ) -> WorkerKey:
        x64 = backend == "jax" and "float64" in precisions
        precisions = ("float32", "float64") if x64 else ("float32",)
        return cls(backend, precisions, tuple(imports), entry)


def ended(backend: str, proc: subprocess.Popen, stderr: Any) -> TfparityError:
    """The error for a worker whose stdout closed before it answered: its exit code and
    the last line it wrote to ``stderr`` (a file, read from the start)."""
    proc.wait()
    stderr.seek(0)
    last = stderr.read().strip().splitlines()[-1:] or ["no message"]
    return TfparityError(
        f"the {backend} backend's process ended (exit code {proc.returncode}): {last[0]}"
    )


class ServingWorker:
    """One serving process: ``submit`` a request, then ``wait`` for its answer (or
    ``ask``, both). A request that fails in the worker, one that runs past its deadline
    (the process is killed) and a process that ended are each one TfparityError naming
    the backend; ``close`` (or the worker being collected, or the interpreter exiting)
    ends the process."""

    def __init__(self, key: WorkerKey) -> None:
        self.key = key
        self._stderr = tempfile.TemporaryFile("w+")  # a file: a pipe could fill and block
        command = [sys.executable, "-m", key.entry, "--serve"]
        command += [a for m in key.imports for a in ("--import", m)]
        self._proc = subprocess.Popen(
            command,
            env=environment(key.backend, key.precisions),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self._lines = Lines(self._proc.stdout)  # type: ignore[arg-type]
        self._end = weakref.finalize(self, _ended_now, self._proc, self._stderr)

    def submit(self, request: Any, kind: str = "run") -> None:
        """Ask for one request of ``kind`` (a kind of :data:`.worker.REQUESTS`, or of
        the handlers its entry adds), ``request`` its JSON; read once its imports are
        done."""
        try:
            self._proc.stdin.write(f"{kind} {json.dumps(request)}\n".encode())  # type: ignore[union-attr]
            self._proc.stdin.flush()  # type: ignore[union-attr]
        except OSError:  # it ended already: wait() says why
            pass

    def wait(self, timeout_s: float | None = None) -> str:
        """The text of the answer to the request submitted: a TfparityError naming the
        backend where the worker answered an error (``the BACKEND backend could not run
        the model: its paragraph``), the process ended first (with its last line of
        stderr) or ran past ``timeout_s`` (default :data:`REQUEST_TIMEOUT_S`; then it is
        killed)."""
        backend = self.key.backend
        timeout_s = REQUEST_TIMEOUT_S if timeout_s is None else timeout_s
        try:
            line = self._lines.next(timeout_s)
        except TimeoutError:
            self.kill()
            raise TfparityError(
                f"the {backend} backend's process ran past {timeout_s:g} s."
            ) from None
        if line is None:
            raise ended(backend, self._proc, self._stderr)
        kind, text = line
        if kind == "error":
            raise TfparityError(f"the {backend} backend could not run the model: {text}")
        return text

    def ask(self, kind: str, request: Any, timeout_s: float | None = None) -> str:
        """``submit`` then ``wait``: the answer's text."""
        self.submit(request, kind)
        return self.wait(timeout_s)

    def poll(self) -> int | None:
        return self._proc.poll()

    def kill(self) -> None:
        self._end()

    def close(self) -> None:
        """End it. A serving worker between requests holds nothing the parent still
        needs (each request's files are written before it answers), and a framework's
        teardown at exit takes seconds, so it is killed rather than asked to exit."""
        self.kill()


def _ended_now(proc: subprocess.Popen, stderr: Any) -> None:
    """Kill ``proc`` (if it still runs), reap it, close its pipes (once: a finalizer)."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for pipe in (proc.stdin, proc.stdout, stderr):
        if pipe is not None:
            pipe.close()


class BackendWorkers:
    """Serving processes by key, idle ones reused; a context manager that ends them all.
    Thread-safe: two launches may take workers at once (a quantised check runs its
    float referee beside the quantised runs)."""

    def __init__(self) -> None:
        self._idle: dict[WorkerKey, list[ServingWorker]] = {}
        self._all: list[ServingWorker] = []
        self._lock = threading.Lock()

    def __enter__(self) -> BackendWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def warm(self, keys: list[WorkerKey]) -> None:
        """Start a process for each key that has no idle one yet (they import while the
        caller goes on)."""
        with self._lock:
            for key in keys:
                if not self._idle.get(key):
                    self._idle.setdefault(key, []).append(self._started(key))

    def take(self, key: WorkerKey) -> ServingWorker:
        """An idle process started as ``key`` (a live one), else a new one."""
        with self._lock:
            idle = self._idle.get(key, [])
            while idle:
                worker = idle.pop(0)
                if worker.poll() is None:
                    return worker
            return self._started(key)

    def give_back(self, worker: ServingWorker) -> None:
        """``worker`` answered its run: idle again, for the next run with its key."""
        with self._lock:
            self._idle.setdefault(worker.key, []).append(worker)

    def started(self) -> int:
        """How many processes this set has started (the reuse a test can see)."""
        return len(self._all)

    def close(self) -> None:
        with self._lock:
            workers, self._all, self._idle = self._all, [], {}
        for worker in workers:
            worker.close()

    def _started(self, key: WorkerKey) -> ServingWorker:
        worker = ServingWorker(key)
        self._all.append(worker)
        return worker

"""Where one ``tfparity backends`` run's processes come from: a set of serving workers
(:class:`~tfparity.adapters.keras_backends.workers.BackendWorkers`, the caller's or the
run's own), all serving the preparing module (:data:`.prepare.ENTRY`): a run that
prepares its model (a keras-hub spec, a callable, ``--quantize``) has its TensorFlow
process convert, build or quantise it and then run it, so the parent imports no
framework, and TensorFlow, Keras and keras-hub are imported once, by a process that
started before anything else. Every run serves the same module, so a set of workers
lends the same processes to a file's run and a spec's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..adapters.keras_backends import LaunchPlan
from ..adapters.keras_backends.workers import BackendWorkers, WorkerKey
from .prepare import ENTRY, PREPARE_TIMEOUT_S


@dataclass(frozen=True)
class Processes:
    """The workers a run takes its processes from and the modules they import (the same
    for every process of the run, so the TensorFlow process that prepared the model is
    the one that runs it)."""

    workers: BackendWorkers
    imports: tuple[str, ...]

    def plan(self, path: Path, backends: tuple[str, ...], referee: str, **kw: Any) -> LaunchPlan:
        """The launch of ``path`` on ``backends`` (and ``referee``'s float64) here."""
        return LaunchPlan(path, backends, referee, self.imports, entry=ENTRY, **kw)

    def step(self, arguments: list[str]) -> None:
        """The preparing step (:func:`.prepare.main`'s ``arguments``), run by the run's
        TensorFlow process; its errors are in the meta it writes."""
        key = WorkerKey.of("tensorflow", ("float32",), self.imports, ENTRY)
        worker = self.workers.take(key)
        worker.submit(arguments, kind="prepare")
        worker.wait(PREPARE_TIMEOUT_S)
        self.workers.give_back(worker)

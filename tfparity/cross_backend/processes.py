"""Where one ``tfparity backends`` run's processes come from: a set of serving workers
(:class:`~tfparity.adapters.keras_backends.workers.BackendWorkers`, the caller's or the
run's own) and the module they serve. A run that prepares its model (a keras-hub spec,
a callable, ``--quantize``) serves the preparing module (:data:`.prepare.ENTRY`), so
its TensorFlow process converts, builds or quantises the model and then runs it: the
parent imports no framework, and TensorFlow, Keras and keras-hub are imported once, by a
process that started before anything else."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..adapters.keras_backends import LaunchPlan
from ..adapters.keras_backends.workers import WORKER, BackendWorkers, WorkerKey
from .prepare import ENTRY, PREPARE_TIMEOUT_S, Step


@dataclass(frozen=True)
class Processes:
    """The workers a run takes its processes from, the module they serve and the
    modules they import (the same for every process of the run, so the TensorFlow
    process that prepared the model is the one that runs it)."""

    workers: BackendWorkers
    imports: tuple[str, ...]
    preparing: bool

    @property
    def entry(self) -> str:
        return ENTRY if self.preparing else WORKER

    def plan(self, path: Path, backends: tuple[str, ...], referee: str, **kw: Any) -> LaunchPlan:
        """The launch of ``path`` on ``backends`` (and ``referee``'s float64) here."""
        return LaunchPlan(path, backends, referee, self.imports, entry=self.entry, **kw)

    def step(self) -> Step | None:
        """The preparing step run by the run's TensorFlow process; None where this run's
        processes do not prepare (then it runs here, or in a process of its own)."""
        return self._prepared_by_tensorflow if self.preparing else None

    def _prepared_by_tensorflow(self, arguments: list[str]) -> str:
        key = WorkerKey.of("tensorflow", ("float32",), self.imports, self.entry)
        worker = self.workers.take(key)
        worker.submit(arguments, kind="prepare")
        worker.wait(PREPARE_TIMEOUT_S)  # its errors are in the meta it writes
        self.workers.give_back(worker)
        return ""

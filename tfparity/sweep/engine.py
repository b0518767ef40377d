"""What a sweep engine is: the interface :func:`~tfparity.sweep.runner.run_sweep` drives.

An engine loads the model (once per process that runs batches), turns corpus items into
result records batch by batch, tells what it knows of the run for ``summary.json``'s
``run``, and releases what it holds. The driver alone writes the records, so resume,
merge and the reports do not depend on the engine. Two engines meet it: the local one
(:class:`~tfparity.sweep.local.LocalEngine`, this process) and the Ray one
(:class:`~tfparity.sweep.ray_engine.RayEngine`, Ray actors); ``run_sweep`` picks one
from ``runner.ENGINES`` by the type of ``SweepOptions.engine``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from .corpus import Item
from .options import SweepOptions


@runtime_checkable
class SweepEngine(Protocol):
    """A started engine: the model loaded, ready for items."""

    @property
    def top1_note(self) -> str | None:
        """Why top-1 token agreement cannot be measured (e.g. no LM head), or None."""
        ...

    def records(self, items: Iterator[Item]) -> Iterator[list[dict]]:
        """One list of result records per finished batch (or per item too long to run),
        each item exactly once, read from ``items`` lazily. The caller may stop early:
        what it was given is final (items still in buckets are simply not run)."""
        ...

    def run_facts(self) -> dict:
        """The facts of ``summary.json``'s ``run`` that the engine knows: traces,
        execution, buckets, referee (the Ray engine adds ``engine``). Called after
        ``records``, before ``close``."""
        ...

    def close(self) -> None:
        """Release what the engine holds (Ray: its actors, and the cluster it started).
        Called once, also after an error."""
        ...


class EngineStart(Protocol):
    """How an engine is started (``LocalEngine.start``, ``RayEngine.start``): refuses
    bad input (exit 2) before or while the model loads."""

    def __call__(
        self,
        model: Any,
        checks: tuple[str, ...],
        pt: Any,
        options: SweepOptions,
        execution: Any,
    ) -> SweepEngine: ...

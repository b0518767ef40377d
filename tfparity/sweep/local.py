"""The local engine of the sweep (the default, ``--engine local``): the model loaded
once in this process, each batch run as the corpus is read and bucketed."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .corpus import Item
from .options import SweepOptions
from .setup import SweepSetup, padded_stream


@dataclass
class LocalEngine:
    """A :class:`~tfparity.sweep.engine.SweepEngine` in this process."""

    setup: SweepSetup

    @classmethod
    def start(
        cls, model: Any, checks: tuple[str, ...], pt: Any, options: SweepOptions, execution: Any
    ) -> LocalEngine:
        return cls(SweepSetup.load(model, checks, pt, options, execution))

    @property
    def top1_note(self) -> str | None:
        return self.setup.top1_note

    def records(self, items: Iterator[Item]) -> Iterator[list[dict]]:
        """One list of result records per batch (or per item too long to run)."""
        for unit in padded_stream(self.setup.encoding(), items, self.setup.options):
            yield unit if isinstance(unit, list) else self.setup.run_batch(unit)

    def run_facts(self) -> dict:
        return self.setup.run_facts()

    def close(self) -> None:
        """Nothing to release: the model goes with the engine."""

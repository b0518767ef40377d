"""A PyTorch reference replayed from golden outputs (no torch needed to replay).

:class:`StoredReference` answers the cross-check's questions (``recorded``, ``run``,
``weights``, ``config``) from a :class:`tfparity.golden.Golden` instead of a live
model, so ``crosscheck`` runs unchanged against it. :func:`capture` makes one from a
live :class:`PTModel` (running it once), which is what ``--save-outputs`` stores.

It is not a PyTorch model: what needs one (gradients, generation, a run in another
precision) it refuses by name, exit 2, as :class:`~..interfaces.sides.ReferenceBase`
states it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...errors import TfparityError
from ...golden import Golden, StoredRun, batch_inputs, load_reference, match_batches
from ...inputs import Batch
from ...trace import Trace
from ..interfaces import taps
from ..interfaces.sides import ReferenceBase
from ..sources.holdings import Holdings
from .pt_model import PTModel


@dataclass
class StoredReference(ReferenceBase):
    """The reference's runs for known batches; ``source`` is the live model it was
    captured from (None when loaded from a file: weight hints are then unavailable)."""

    name: str
    config: Any
    golden: Golden
    notes: list[str] = field(default_factory=list)
    holdings: Holdings | None = None
    config_changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # none: stored
    source: PTModel | None = None
    _index: dict[bytes, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for i, run in enumerate(self.golden.runs):
            self._index[_key(run.inputs)] = i

    @classmethod
    def load(cls, path: str | Path, batches: Sequence[Batch]) -> StoredReference:
        """Read ``path`` and check it holds exactly ``batches`` (else exit 2)."""
        golden = load_reference(path)
        match_batches(golden, batches, path)
        notes = [
            f"PyTorch reference replayed from {path} (saved from {golden.model!r} by "
            f"tfparity {golden.tfparity_version}); weight-level hints need the live model."
        ]
        return cls(
            name=f"{golden.reference} (stored in {path})",
            config=SimpleNamespace(**golden.config),
            golden=golden,
            notes=notes,
        )

    @property
    def reference_kind(self) -> str:
        return "stored outputs (a golden file: PyTorch's float32 and float64 runs)"

    def localisable(self) -> bool:
        """Whether the file holds the sub-layer taps of its runs."""
        return bool(self.golden.tapped)

    def run(self, batch: Batch, *, float64: bool = False) -> Trace:
        return self.recorded(batch, float64=float64)[0]

    def recorded(
        self, batch: Batch, *, float64: bool = False, tapped: bool = False
    ) -> tuple[Trace, dict[str, np.ndarray]]:
        run = self._run_for(batch)
        trace = Trace(dict(run.fp64 if float64 else run.fp32))
        if not tapped:
            return trace, {}
        stored = run.fp64_taps if float64 else run.fp32_taps
        return trace, {k: np.asarray(v, np.float64) for k, v in stored.items()}

    def weights(self) -> dict[str, np.ndarray]:
        return self.source.weights() if self.source is not None else {}

    def named_weights(self) -> list[tuple[str, Any]]:
        """The live model's, where it was captured from one; none from a file."""
        return self.source.named_weights() if self.source is not None else []

    def head_weight_names(self) -> list[str]:
        """The live model's head weights; none from a file (no model to compare)."""
        return self.source.head_weight_names() if self.source is not None else []

    def _run_for(self, batch: Batch) -> StoredRun:
        i = self._index.get(_key(batch_inputs(batch)))
        if i is None:
            raise TfparityError(
                "This batch is not in the stored outputs; run with the inputs they were saved with."
            )
        return self.golden.runs[i]


def capture(pt_model: PTModel, batches: Sequence[Batch], model: str = "") -> StoredReference:
    """Run ``pt_model`` once per batch (fp32 and fp64, with taps where the family has them)
    and keep the results: the cross-check then reads them, and they can be saved."""
    tapped = taps.supported(pt_model.config)
    runs = []
    for batch in batches:
        fp32, fp32_taps = pt_model.recorded(batch, tapped=tapped)
        # Taps are recorded as float64; the fp32 run's fit float32 exactly (half the file).
        fp32_taps = {k: np.asarray(v, np.float32) for k, v in fp32_taps.items()}
        fp64, fp64_taps = pt_model.recorded(batch, float64=True, tapped=tapped)
        runs.append(StoredRun(batch_inputs(batch), dict(fp32), dict(fp64), fp32_taps, fp64_taps))
    golden = Golden(
        model=model,
        reference=pt_model.name,
        config=_config_dict(pt_model.config),
        runs=runs,
        tapped=tapped,
    )
    return StoredReference(
        name=pt_model.name,
        config=pt_model.config,
        golden=golden,
        notes=list(pt_model.notes),
        source=pt_model,
    )


def _config_dict(config: Any) -> dict[str, Any]:
    if hasattr(config, "to_dict"):
        return config.to_dict()
    return dict(vars(config))


def _key(inputs: dict[str, np.ndarray]) -> bytes:
    """Batches are found by their contents (ids, mask, ...), not by position."""
    parts = []
    for name in sorted(inputs):
        a = np.ascontiguousarray(inputs[name], np.int32)
        parts.append(name.encode() + str(a.shape).encode() + a.tobytes())
    return b"|".join(parts)

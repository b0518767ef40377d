"""Run-to-run variation: TF run a second time on the same inputs, where a cross-check
failed, and the first tensor that changed between the two runs named.

A port whose dropout ignores ``training=False`` (or that draws any other random number
at inference) fails the cross-check with differences that no weight, config field or
numeric signature explains: the LayerNorm-epsilon fit, tried on a tensor that changes
on every run, named a cause that was not there. One extra TF run, only when a check
fails, tells the two apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...adapters.interfaces.sides import TFSide
from ...inputs import Batch
from ...trace import Trace, hidden_state_index, layer_of

# Two runs of a deterministic model agree bit for bit on CPU; on an accelerator a
# reduction in another order moves a float32 value by a few ulps (about 1e-6 relative).
# Dropout at rate p zeroes p of the values and scales the rest by 1/(1-p): an O(1)
# relative change. Any change above this fraction of the tensor's largest value counts.
RELATIVE = 1e-4


@dataclass(frozen=True)
class Variation:
    """The first tensor (trace order: hidden states first) whose two TF runs on the same
    inputs differ, and by how much."""

    name: str
    max_abs_diff: float
    largest: float  # the tensor's largest absolute value, for scale

    @property
    def where(self) -> str:
        """The layer that varies first, as the report names layers."""
        k = hidden_state_index(self.name)
        if k is None:
            return self.name
        layer = layer_of(k)
        return f"{self.name} (the embeddings' output)" if k == 0 else f"{self.name} (layer {layer})"

    def hint(self) -> str:
        return (
            f"TF's outputs change from run to run: two TF runs on the same inputs differ "
            f"from {self.where} on (by up to {self.max_abs_diff:.3g}, against values up to "
            f"{self.largest:.3g}), so TF computes something random at inference: dropout "
            "active at inference (a layer that ignores training=False), or another source "
            "of randomness. Make TF's run deterministic first; no weight or config "
            "difference explains a tensor that changes on every run"
        )


def varying(first: Trace, second: Trace) -> Variation | None:
    """The first tensor of ``first`` that ``second`` (the same inputs) changes beyond
    :data:`RELATIVE` of its scale; None where the runs agree."""
    for name in first:
        if name not in second:
            continue
        a, b = np.asarray(first[name]), np.asarray(second[name])
        if a.shape != b.shape or not np.issubdtype(a.dtype, np.floating):
            continue
        finite = np.isfinite(a) & np.isfinite(b)
        if not finite.any():
            continue
        diff = float(np.max(np.abs(a[finite] - b[finite])))
        largest = float(np.max(np.abs(a[finite])))
        if diff > RELATIVE * max(largest, np.finfo(np.float32).tiny):
            return Variation(name, diff, largest)
    return None


def run_to_run(tf_model: TFSide, batch: Batch, first: Trace) -> Variation | None:
    """TF run once more on ``batch``, whose first run gave ``first``; the first tensor
    that changed (one extra TF run: call it only where a check failed)."""
    return varying(first, tf_model.run(batch))

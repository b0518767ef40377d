"""The distribution metrics of ``generate``'s teacher-forced steps (docs/quantised.md).

Both sides are fed PyTorch's greedy tokens, so step k of each prompt is one position
with the same context on both sides, as llama.cpp scores a text: KL(P_PyTorch ||
P_TF), same top-1, Δp at the scored token (PyTorch's greedy token k, the text being
decoded) and ln(PPL ratio) over PyTorch's continuation. Each prompt is one item of the
bootstrap. They describe; the float64 referee's per-step verdict still judges the
tokens, unless a ``--kl-budget`` is set. Numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...compare.distribution import PositionMetrics, concatenate, position_metrics
from .steps import Forced


def forced_distribution(
    forced: Sequence[Forced], tokens: Sequence[np.ndarray]
) -> PositionMetrics | None:
    """Per prompt ``i``, its teacher-forced logits ``[steps, vocab]`` (PyTorch the
    reference) scored at PyTorch's tokens; None where no step was decoded or the sides'
    logits differ in shape (a failed comparison already)."""
    parts = []
    for i, (f, t) in enumerate(zip(forced, tokens, strict=True)):
        steps = np.shape(f.pt)[0]
        if steps == 0 or np.shape(f.tf) != np.shape(f.pt) or np.ndim(f.pt) != 2:
            return None
        targets = np.asarray(t, np.int64).reshape(-1)[None, :steps]
        parts.append(position_metrics(f.pt[None], f.tf[None], None, targets, i))
    return concatenate(parts) if parts else None

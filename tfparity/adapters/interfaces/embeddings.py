"""What a side's embedding layer and LM head are, as numpy: the answers of
:meth:`~.sides.TFSide.embedding_parts`, :meth:`~.sides.TFSide.position_facts` and
:meth:`~.sides.TFSide.lm_head`.

Framework-free records, so the checks that judge them (diagnose, positions, the
embeddings check) import only the interfaces; which side can read them off its model
(the Hugging Face TF side) is that side's business, and the others refuse by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LayerNormParams:
    """Scale, shift and epsilon of the embedding LayerNorm (over the last axis)."""

    gamma: np.ndarray
    beta: np.ndarray
    eps: float


@dataclass(frozen=True)
class EmbeddingParts:
    """What the embedding layer sums (and normalises) to make ``hidden_states[0]``.

    ``position`` and ``token_type`` are the full tables (rows indexed by position or
    type id) or None when the model has none; ``layer_norm`` is None for models
    without one (GPT-2). ``gather_code`` is the line a user would write to gather the
    word embeddings of this model correctly.
    """

    word: np.ndarray
    position: np.ndarray | None
    token_type: np.ndarray | None
    layer_norm: LayerNormParams | None
    gather_code: str

    @property
    def width(self) -> int:
        return int(self.word.shape[1])


@dataclass(frozen=True)
class PositionFacts:
    """How a model encodes positions, for the positions check."""

    kind: str  # "absolute" (a table added to the embeddings), "relative" or "rotary"
    takes_position_ids: bool
    causal: bool
    window_kind: str | None = None  # what mixes tokens in sequence order (None: nothing)
    window: int | None = None  # its window in tokens (None: none, or no window)


@dataclass(frozen=True)
class LMHead:
    """A model's LM head: the output matrix, whether it is the input matrix itself,
    a description of the transform before it, and a way to apply the whole head."""

    output_matrix: np.ndarray
    tied: bool
    transform: str
    logits: Callable[[np.ndarray], np.ndarray] | None  # None where widths do not allow it

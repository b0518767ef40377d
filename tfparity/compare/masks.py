"""Which elements of a leaf count: the attention mask's one rule, and where the kept
elements sit.

The rule, written once (:func:`leaf_mask`) and used by comparisons, the referee, the
sweep's per-row verdicts and the modes check: a ``[batch, seq]`` attention mask applies
to a leaf whose first two axes are ``[batch, seq]`` (rank 2 or more: hidden states,
logits, per-token scores), except to a pooled output. A pooled output is one vector per
sequence, ``[batch, hidden]``; its shape alone cannot tell it from ``[batch, seq]`` when
``hidden`` happens to equal the sequence length, so it is known by its name.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# Leaf names (the last part of a dotted or prefixed name) of one vector per sequence:
# HF's outputs, and the ``pooler`` sub-layer tap.
POOLED_OUTPUTS = ("pooler_output", "pooled_output", "pooler")


def is_pooled(name: str) -> bool:
    """``name`` is a pooled output: ``pooler_output``, ``bf16:pooler_output``, ``pooler``."""
    return re.split(r"[.:]", name)[-1] in POOLED_OUTPUTS


def leaf_mask(mask: Any, shape: Sequence[int], name: str = "") -> np.ndarray | None:
    """The ``[batch, seq]`` mask as booleans when it applies to the leaf ``name`` of
    ``shape``; None when it does not (no mask, a pooled output, or another shape)."""
    if mask is None or is_pooled(name):
        return None
    if len(shape) < 2 or tuple(shape[:2]) != np.shape(mask):
        return None
    return np.asarray(mask).astype(bool, copy=False)


def valid_positions(
    shape: Sequence[int], mask: np.ndarray | None, name: str = ""
) -> np.ndarray | None:
    """The mask broadcast over a leaf of ``shape`` (a boolean array of ``shape``), or None
    when it does not apply (:func:`leaf_mask`)."""
    m = leaf_mask(mask, shape, name)
    if m is None:
        return None
    return np.broadcast_to(m.reshape(m.shape + (1,) * (len(shape) - 2)), tuple(shape))


def kept_rows(shape: Sequence[int], mask: Any, name: str = "") -> np.ndarray | None:
    """Which token rows (``[batch, seq]`` flattened) the mask keeps; None when it does
    not apply or keeps them all. Rows, not elements: selecting whole token rows copies
    contiguous memory, several times faster than an element mask."""
    m = leaf_mask(mask, shape, name)
    if m is None:
        return None
    keep = m.reshape(-1)
    return None if keep.all() else keep


def row_width(x: np.ndarray) -> int:
    """Elements per token row of a ``[batch, seq, ...]`` leaf."""
    return math.prod(x.shape[2:])  # not np.prod: it builds an array, on every batch of a leaf


def token_rows(x: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``x`` as ``[batch * seq, rest]`` (``rest`` 1 for a ``[batch, seq]`` leaf)."""
    return x.reshape(keep.size, row_width(x))


@dataclass
class Layout:
    """Where each batch's valid elements sit among the leaf's valid elements, flattened
    in order: a statistic's index maps back to ``(sample, ...)`` through it."""

    shapes: list[tuple[int, ...]]
    # Per batch: which of its ``batch * seq`` token rows are valid (None: all elements).
    keeps: list[np.ndarray | None]
    offsets: np.ndarray  # start of each batch among the valid elements
    total: int

    @classmethod
    def of(cls, arrays: Sequence[np.ndarray], masks: Sequence[Any], name: str = "") -> Layout:
        """The layout of the leaf ``name``'s batches ``arrays`` under ``masks``."""
        keeps = [kept_rows(x.shape, m, name) for x, m in zip(arrays, masks, strict=True)]
        sizes = [
            x.size if k is None else int(np.count_nonzero(k)) * row_width(x)
            for x, k in zip(arrays, keeps, strict=True)
        ]
        offsets = np.array([0, *itertools.accumulate(sizes[:-1])], dtype=np.int64)
        return cls([x.shape for x in arrays], keeps, offsets, int(sum(sizes)))

    def rows(self, x: np.ndarray, batch: int) -> np.ndarray:
        """Batch ``batch``'s valid elements of ``x``, flattened (a view when none is
        padded: selecting rows would copy the whole batch)."""
        keep = self.keeps[batch]
        if keep is None:
            return x.reshape(-1)
        return token_rows(x, keep)[keep].reshape(-1)

    def locate(self, k: int) -> tuple[int, tuple[int, ...]]:
        """The batch holding valid element ``k``, and the element's index in it."""
        batch = int(np.searchsorted(self.offsets, k, side="right") - 1)
        shape, keep = self.shapes[batch], self.keeps[batch]
        flat = k - int(self.offsets[batch])
        if keep is not None:
            inner = math.prod(shape[2:])
            row, col = divmod(flat, inner)
            flat = int(np.flatnonzero(keep)[row]) * inner + col
        return batch, tuple(int(i) for i in np.unravel_index(flat, shape))

    def index_of(self, k: int) -> list[int]:
        """Valid element ``k``'s index, its first axis counting rows across batches."""
        batch, index = self.locate(k)
        out = list(index)
        if out:
            out[0] += sum(s[0] for s in self.shapes[:batch])
        return out

"""Error growth: where a budget-judged model's error comes from, and the per-layer
budget of a Keras-quantised model (no layer may multiply its input's error by more than
a correct quantisation does).

Each hidden state's error relative to the reference's size, and what each layer adds
to it (:func:`error_growth`); the layer that adds most is the one that quantises worst
(:func:`ranked_layers`). A quantised model's error grows layer by layer: how many times
its input's error a hidden state has is its *growth*. A correct quantisation adds a
little at each layer: over the tiny keras-hub families and MiniLM's real weights, no
block's growth exceeded x1.6 in int8, int4 or float8 past the first block (x2.6 there;
``scripts/quantised_growth.py``; the table in docs/quantised.md, "Budgets that see one
damaged layer"). One damaged scale makes its block stand out: x1.5 on one feed-forward
``kernel_scale`` gives x3.0 on MiniLM in int8, x50 gives x9. So a layer whose growth is
over its mode's limit FAILs and is named, with its factor. This judges a backbone,
which has no LM head for the distribution budget, and an LM beside its distribution
budget. Numpy only.

What it cannot see: a layer fed no error (growth from 0: the first quantised layer,
the embeddings) and damage smaller than the quantisation's own error: x1.05 on a scale
in any mode (x1.2 on MiniLM int8, inside a clean block's), x1.5 in int4 (int4's own
error hides it: x1.46 on MiniLM) or float8. Those are for the exact check against a
fresh quantisation of the source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import TfparityError
from ..trace import layer_of
from .masks import leaf_mask
from .quantisation import ONNX_INT8


@dataclass(frozen=True)
class LayerError:
    """One hidden state's error relative to the reference's size (RMS of the
    difference over RMS of the reference, valid tokens only), and what the layer that
    made it added to the error of its input."""

    hidden_state: int
    layer: int | str  # "embeddings" for hidden state 0
    relative_error: float
    added: float  # relative_error minus the previous hidden state's

    @property
    def growth(self) -> float | None:
        """How many times the error of its input this layer's output has (None: from 0)."""
        before = self.relative_error - self.added
        return self.relative_error / before if before > 0 else None


def error_growth(
    actual: Sequence[Sequence[np.ndarray]],
    expected: Sequence[Sequence[np.ndarray]],
    masks: Sequence[np.ndarray | None],
) -> list[LayerError]:
    """Per hidden state ``k`` (``actual[b][k]``: batch ``b``'s hidden state ``k``), its
    relative error and what its layer added."""
    rows: list[LayerError] = []
    before = 0.0
    for k in range(len(expected[0]) if expected else 0):
        diff = ref = 0.0
        for a, e, mask in zip(actual, expected, masks, strict=True):
            keep = leaf_mask(mask, np.shape(e[k]), f"hidden_states[{k}]")
            d = np.asarray(a[k], np.float64) - np.asarray(e[k], np.float64)
            r = np.asarray(e[k], np.float64)
            if keep is not None:
                d, r = d[keep], r[keep]
            diff += float(np.sum(d * d))
            ref += float(np.sum(r * r))
        relative = float(np.sqrt(diff / ref)) if ref > 0 else 0.0
        rows.append(LayerError(k, layer_of(k), relative, relative - before))
        before = relative
    return rows


def worst_layer(rows: Sequence[LayerError]) -> LayerError | None:
    """The layer that adds the most error (the one that quantises worst)."""
    return max(rows, key=lambda r: r.added, default=None)


def ranked_layers(rows: Sequence[LayerError]) -> list[LayerError]:
    """The layers, the one that adds the most error first (``llm-compressor#1990``'s
    question, "which layer hurts quant accuracy?"): its first is :func:`worst_layer`'s
    (a tie keeps the earlier layer first, as ``max`` does)."""
    return sorted(rows, key=lambda r: -r.added)


# The most times its input's relative error one block's output may have, per Keras mode
# (scripts/quantised_growth.py on 4 tiny keras-hub families and MiniLM): clean, at most
# x1.54 in int8, x1.44 in int4, x1.55 in float8; one feed-forward scale damaged x1.5, at
# least x2.98 in int8 (MiniLM), x50 at least x5.64 in int4 and x4.23 in float8. The limit
# sits between with margin both ways (x1.43 above the clean, x1.35 under the damaged).
DEFAULT_GROWTH: dict[str, float] = {
    "int8": 2.2,
    "int4": 2.2,
    "float8": 2.2,
    # ONNX Runtime's int8 (both quantisers; MiniLM, five default-ish settings): clean
    # blocks after the first at most x1.36; tiny BERT's FFN scale x1.5: x3.78
    ONNX_INT8: 2.2,
}
# The first block is fed only the embedding table's error (a lookup, finer than a
# block's matmuls), so it grows more when clean: at most x2.57 (tiny GPT-2 int8, whose
# position table is not quantised), x1.86 int4. Its own limit, about 1.5x that.
FIRST_BLOCK_GROWTH = 4.0
# ONNX Runtime also quantises the embedding lookup (Gather) and, per tensor, the first
# block's inputs: MiniLM's first block grows x4.73-x5.25 clean; about 1.5x that.
FIRST_BLOCK_BY_MODE = {ONNX_INT8: 8.0}


@dataclass(frozen=True)
class GrowthLimit:
    """A layer's limit on its growth, by the mode it was quantised to."""

    mode: str
    growth: float
    origin: str = "default"

    def text(self) -> str:
        return f"growth <= x{self.growth:g} ({self.mode}, {self.origin})"


@dataclass(frozen=True)
class LayerOver:
    """A layer over its limit: where (hidden state, layer), by how much, and its mode."""

    hidden_state: int
    layer: int | str
    growth: float
    relative_error: float
    limit: GrowthLimit

    def text(self) -> str:
        where = "embeddings" if self.layer == "embeddings" else f"layer {self.layer}"
        return (
            f"{where} (hidden_states[{self.hidden_state}]) has x{self.growth:.3g} its input's "
            f"relative error (to {self.relative_error:.3g}), over the {self.limit.mode} "
            f"per-layer limit x{self.limit.growth:g}"
        )


def has_limit(mode: str) -> bool:
    """Whether every mode of ``mode`` (``int4+int8``) has a measured limit."""
    return all(m in DEFAULT_GROWTH for m in mode.split("+"))


def growth_limit(mode: str, first: bool = False) -> GrowthLimit:
    """The limit of ``mode`` (``int8``); a mixed one (``int4+int8``) takes its coarsest
    mode's, the largest; ``first``: the first block's (:data:`FIRST_BLOCK_GROWTH`). Exit
    2 for a mode no limit was measured for."""
    found = mode.split("+")
    if not has_limit(mode):
        raise TfparityError(
            f"No per-layer growth limit for quantisation {mode!r}; measured for "
            f"{', '.join(DEFAULT_GROWTH)} (docs/quantised.md)."
        )
    coarsest = max(found, key=lambda m: DEFAULT_GROWTH[m])
    if first:
        first_limit = FIRST_BLOCK_BY_MODE.get(coarsest, FIRST_BLOCK_GROWTH)
        return GrowthLimit(mode, first_limit, "the first block's")
    return GrowthLimit(mode, DEFAULT_GROWTH[coarsest], f"default for {coarsest}")


# Bits of each mode's weights: a layer coarser than every layer before it is fed an
# error of a finer mode, so its growth says nothing of its own quantisation.
BITS = {"int8": 8, "float8": 8, "int4": 4, ONNX_INT8: 8}


def over_limit(
    rows: Sequence[LayerError],
    mode: str,
    modes: Mapping[int | str, str] | None = None,
) -> list[LayerOver]:
    """The layers whose growth is over their limit, the worst first: each layer by its
    own mode where ``modes`` (layer -> mode, a mixed-mode model's) names it, else by
    ``mode``'s. A layer coarser than the layers before it (int4 after int8: measured x13
    growth, correct) is not held to it: see :func:`unjudged`."""
    modes = modes or {}
    found = []
    for r in rows:
        if r.growth is None or r.layer in unjudged(rows, modes):
            continue
        limit = growth_limit(modes.get(r.layer, mode), first=r.layer == 0)
        if r.growth > limit.growth:
            found.append(LayerOver(r.hidden_state, r.layer, r.growth, r.relative_error, limit))
    return sorted(found, key=lambda o: -o.growth)


def unjudged(rows: Sequence[LayerError], modes: Mapping[int | str, str]) -> list[int | str]:
    """The layers of a mixed-mode model whose mode is coarser than every mode before them
    (their growth measures the change of mode, not their quantisation)."""
    coarsest_before: int | None = None
    found = []
    for r in sorted(rows, key=lambda r: r.hidden_state):
        bits = min((BITS.get(m, 8) for m in modes.get(r.layer, "").split("+") if m), default=None)
        if bits is None:
            continue
        if coarsest_before is not None and bits < coarsest_before:
            found.append(r.layer)
        coarsest_before = bits if coarsest_before is None else min(coarsest_before, bits)
    return found


def limits_text(mode: str, modes: Mapping[int | str, str] | None = None) -> str:
    """The per-layer limits in one phrase: ``growth <= x2.2 per layer (default for
    int8)``, or by mode for a mixed model."""
    by_mode = sorted(set((modes or {}).values()) or {mode})
    parts = [f"x{growth_limit(m).growth:g} in {m}" for m in by_mode]
    first = f"; the first block's x{FIRST_BLOCK_GROWTH:g}"
    if len(parts) == 1:
        return f"each layer's growth <= x{growth_limit(by_mode[0]).growth:g} ({by_mode[0]}){first}"
    return "each layer's growth <= " + ", ".join(parts) + first

"""The per-layer budget of a Keras-quantised model: no layer may multiply its input's
error by more than a correct quantisation does.

A quantised model's error grows layer by layer (:func:`.budgets.error_growth`): each
hidden state's relative error to the float model, and how many times its input's error
it has (its *growth*). A correct quantisation adds a little at each layer: over the
tiny keras-hub families and MiniLM's real weights, no block's growth exceeded x1.6 in
int8, int4 or float8 past the first block (x2.6 there; ``scripts/quantised_growth.py``;
the table in docs/quantised.md, "Budgets that see one damaged layer"). One damaged
scale makes its block stand out: x1.5 on one feed-forward ``kernel_scale`` gives x3.0
on MiniLM in int8, x50 gives x9. So
a layer whose growth is over its mode's limit FAILs and is named, with its factor. This
judges a backbone, which has no LM head for the distribution budget, and an LM beside
its distribution budget. Numpy only.

What it cannot see: a layer fed no error (growth from 0: the first quantised layer,
the embeddings) and damage smaller than the quantisation's own error: x1.05 on a scale
in any mode (x1.2 on MiniLM int8, inside a clean block's), x1.5 in int4 (int4's own
error hides it: x1.46 on MiniLM) or float8. Those are for the exact check against a
fresh quantisation of the source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import TfparityError
from .budgets import LayerError

# The most times its input's relative error one block's output may have, per Keras mode
# (scripts/quantised_growth.py on 4 tiny keras-hub families and MiniLM): clean, at most
# x1.54 in int8, x1.44 in int4, x1.55 in float8; one feed-forward scale damaged x1.5, at
# least x2.98 in int8 (MiniLM), x50 at least x5.64 in int4 and x4.23 in float8. The limit
# sits between with margin both ways (x1.43 above the clean, x1.35 under the damaged).
DEFAULT_GROWTH: dict[str, float] = {
    "int8": 2.2,
    "int4": 2.2,
    "float8": 2.2,
}
# The first block is fed only the embedding table's error (a lookup, finer than a
# block's matmuls), so it grows more when clean: at most x2.57 (tiny GPT-2 int8, whose
# position table is not quantised), x1.86 int4. Its own limit, about 1.5x that.
FIRST_BLOCK_GROWTH = 4.0


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
        return GrowthLimit(mode, FIRST_BLOCK_GROWTH, "the first block's")
    return GrowthLimit(mode, DEFAULT_GROWTH[coarsest], f"default for {coarsest}")


# Bits of each mode's weights: a layer coarser than every layer before it is fed an
# error of a finer mode, so its growth says nothing of its own quantisation.
BITS = {"int8": 8, "float8": 8, "int4": 4}


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

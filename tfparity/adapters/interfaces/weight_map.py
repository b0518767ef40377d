"""What a TF side knows of its weights, for the cross-check's weight hints: one object
a side hands out (:meth:`TFSide.weight_map`), so the side contract holds one member for
them, not four, and a side that knows nothing of its weights declares nothing.

Imports stay on pure modules, as for :mod:`.sides`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...compare.dequantised import DequantisedWeight
from ...results import Hint


@dataclass(frozen=True)
class FeedForwardWeights:
    """A block's feed-forward weights around its activation, as float64 numpy, for the
    numeric hints (which activation, which LayerNorm epsilon reproduces each side):
    ``up`` and ``down`` as ``([in, out] kernel, [out] bias)``; ``norm`` as (gamma, beta,
    epsilon), None for a pre-norm block."""

    up: tuple[np.ndarray, np.ndarray]
    down: tuple[np.ndarray, np.ndarray]
    norm: tuple[np.ndarray, np.ndarray, float] | None
    activation: str  # the TF side's activation name


class WeightMap:
    """A side's weights by the PyTorch names they stand for. This base knows none (an
    export of a Keras 3 model, a callable of one's own without ``weights=``): the hints
    then say the weights were not compared. Each side's map overrides what it knows.

    A caller asks for one map per hint and keeps it: :meth:`note` may say what the last
    :meth:`weights_for` found (a converter's lossy cast)."""

    def weights_for(self, pt_weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The side's values in PyTorch's layout, by the names ``pt_weights`` use."""
        return {}

    def unported(self, pt_weights: dict[str, np.ndarray], prefix: str, contains: str) -> list[Hint]:
        """PyTorch weights under ``prefix`` (holding ``contains``) the side runs without."""
        return []

    def note(self, name: str) -> str | None:
        """How the side's weight ``name`` was converted, where that matters to a hint."""
        return None

    def feed_forward(self, layer: int) -> FeedForwardWeights | None:
        """Block ``layer``'s weights around its activation, for the numeric hints."""
        return None

    def scales_on(self, layer: int | str) -> list[str]:
        """The quantisation scales the side holds for ``layer`` (an index or
        ``embeddings``), named, for the hint on the layer that quantises worst; empty
        where it holds none, or cannot say which layer each belongs to."""
        return []

    def dequantised(
        self, pt_weights: Callable[[], dict[str, np.ndarray]]
    ) -> tuple[list[DequantisedWeight], dict[str, np.ndarray]]:
        """The side's integer weights read back through their scales, by PyTorch's names,
        each to lie within half a step of PyTorch's; and PyTorch's weights. Empty where it
        holds none (``pt_weights`` is then not called: a model's weights are copied only
        where they are compared)."""
        return [], {}


def unmapped(
    pt_weights: dict[str, Any], mapped: set[str | None], prefix: str, contains: str
) -> list[str]:
    """The PyTorch weights under ``prefix`` (holding ``contains``) that no name in
    ``mapped`` is (the position-id buffers aside): those a side runs without."""
    return [
        n
        for n in pt_weights
        if n.startswith(prefix) and contains in n and n not in mapped
        and not n.endswith("position_ids")
    ]  # fmt: skip


@dataclass(frozen=True)
class ValuesOnly(WeightMap):
    """A side that reads its values by PyTorch name and knows nothing else of them (an
    export: a SavedModel's variables, a flatbuffer's constants)."""

    values: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]
    scales: Callable[[int | str], list[str]] | None = None  # a quantised graph's, by layer
    # a quantised graph's integer weights read back (WeightMap.dequantised)
    read_back: Callable[[dict[str, np.ndarray]], list[DequantisedWeight]] | None = None

    def weights_for(self, pt_weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.values(pt_weights)

    def scales_on(self, layer: int | str) -> list[str]:
        return [] if self.scales is None else self.scales(layer)

    def dequantised(
        self, pt_weights: Callable[[], dict[str, np.ndarray]]
    ) -> tuple[list[DequantisedWeight], dict[str, np.ndarray]]:
        if self.read_back is None:
            return [], {}
        reference = pt_weights()
        return (self.read_back(reference) if reference else []), reference

"""``crosscheck --quantize MODE --attribute``: which layer's quantisation hurts, each
one quantised alone.

The per-layer table of ``details["quantisation"]["layers"]`` measures the error each
layer adds with every layer quantised at once; a layer's error there also carries what
the layers before it handed on. Here each quantisable part (the token embedding, with a
causal LM's head where it is the same layer reversed, then each transformer block) is
quantised on its own, in a fresh copy of the float model, and the batches run once
through that copy: one forward pass per part, L+1 for L blocks, beyond the float run
the report already made. Parts are ranked by what each alone moves: the KL mean of the
LM logits against the float model (llama.cpp's figure), or, for a backbone without an
LM head, the relative error of its last hidden state.

What it can see: how quantising each layer of the float model hurts. What it cannot:
damage done to a quantised artefact after quantisation (a scale written wrong in a
stored file), since it quantises the float model afresh; the ``layers`` table of the
quantised model itself names that. Framework-free: sides are made by ``parts``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ...adapters.interfaces.sides import TFSide
from ...compare.distribution import summarise
from ...inputs import Batch
from ...trace import Trace
from . import budgeted, distribution

KL_MEAN = "kl_mean"
LAST_HIDDEN = "relative_error of the last hidden state"
TOP = 3  # the validation: the top 3 of both rankings share at least 2


@dataclass(frozen=True)
class AttributedLayer:
    """One part quantised alone: what it moved, and its rank (1: moves most)."""

    layer: int | str  # "embeddings", or a transformer block's index
    path: str  # the Keras layer path quantised
    value: float
    rank: int


@dataclass(frozen=True)
class Attribution:
    """The one-at-a-time ranking, how it was measured and what it cost."""

    metric: str
    passes: int  # forward passes over the batches, one per part
    layers: list[AttributedLayer]
    top_overlap: int | None  # parts in the top 3 of both rankings; None: no table

    @property
    def top(self) -> AttributedLayer | None:
        return self.layers[0] if self.layers else None

    def as_details(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "passes": self.passes,
            "layers": [asdict(x) for x in self.layers],
            "top3_overlap": self.top_overlap,
        }


def attribute(
    parts: Sequence[tuple[int | str, str]],
    quantised: Callable[[str], TFSide],
    floats: Sequence[Trace],
    batches: Sequence[Batch],
    head: Any,
    ranked: Sequence[int | str] = (),
) -> Attribution:
    """Quantise each of ``parts`` alone (``quantised(path)``: a fresh copy of the float
    model with that layer quantised), run ``batches`` through it, and rank the parts by
    what each moves against the float model's runs ``floats``; ``ranked`` is the
    per-layer table's order, for the top-3 overlap."""
    masks = [b.attention_mask for b in batches]
    found: list[tuple[int | str, str, float]] = []
    metric = KL_MEAN
    for layer, path in parts:
        side = quantised(path)
        runs = [side.run(b) for b in batches]
        del side  # one copy at a time
        value, metric = _moved(runs, floats, batches, masks, head)
        found.append((layer, path, value))
    order = sorted(found, key=lambda x: -x[2])  # a tie keeps the earlier part first
    rows = [AttributedLayer(layer, path, v, i + 1) for i, (layer, path, v) in enumerate(order)]
    overlap = None
    if ranked:
        overlap = len({r.layer for r in rows[:TOP]} & set(list(ranked)[:TOP]))
    return Attribution(metric, len(parts), rows, overlap)


def _moved(
    runs: list[Trace],
    floats: Sequence[Trace],
    batches: Sequence[Batch],
    masks: list[Any],
    head: Any,
) -> tuple[float, str]:
    """The KL mean of the logits against the float model's, else (a backbone) the
    relative error of the last hidden state both hold."""
    metrics = distribution.lm_distribution(runs, floats, batches, head)
    if metrics is not None:
        return float(summarise(metrics).kl_mean), KL_MEAN
    rows = budgeted.growth(runs, floats, masks)
    return (float(rows[-1].relative_error) if rows else 0.0), LAST_HIDDEN


def hint(found: Attribution | None) -> str:
    """The sentence a failing (b) adds: the part that, quantised alone, moves most."""
    top = found.top if found is not None else None
    if top is None:
        return ""
    what = "embeddings" if top.layer == "embeddings" else f"layer {top.layer}"
    return (
        f"; quantised alone, {what} ({top.path}) moves {found.metric} most "
        f"({top.value:.3g}): keep it in float first"
    )

"""What the embedding layer computes from the ids, stage by stage, and how far a
tensor is from each: the candidates a diagnosis names, and the ids a tensor encodes.

Stages are rebuilt in float64 from the model's own tables (raw word embeddings, plus
positions, plus token types, plus token types without positions, after the LayerNorm =
``hidden_states[0]``, and a copy scaled by sqrt(width)); the hidden states after them
come from one run of the model on the ids, which the caller has made already.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...adapters.interfaces.embeddings import EmbeddingParts
from ...adapters.interfaces.sides import TFSide
from ...compare import to_numpy
from ...inputs import Batch
from ...trace import hidden_state_index

# A stage is "it" when the tensor is this close to it (relative L2): loose enough for a
# float16 round trip (~5e-4) or bfloat16 (~4e-3), far below the gap between stages
# (order 0.1 to 1).
MATCH_DISTANCE = 1e-2
_CHUNK = 1024  # tokens per similarity block: bounds memory at _CHUNK x vocab floats

EMBEDDING_STAGES = (
    "word_embeddings",
    "word_plus_position",
    "word_plus_position_plus_type",
    "word_plus_type",
    "post_layernorm",
    "scaled_word_embeddings",
)


def embedding_stages(
    model: TFSide, parts: EmbeddingParts, batch: Batch
) -> dict[str, np.ndarray | None]:
    """Every stage the embedding layer computes from the ids (None: not in this model).
    The word stage is what the ids path gathers: with a change it makes to ids only
    (XGLM's embed_scale), the right inputs_embeds include it."""
    word = parts.word.astype(np.float64)[batch.input_ids]
    if model.ids_only_change is not None:
        word = np.asarray(to_numpy(model.gather(batch.input_ids)), dtype=np.float64)
    positions = positions_of(model, parts, batch)
    with_pos = None if positions is None else word + positions
    types = types_of(parts, batch)
    with_type = None if with_pos is None or types is None else with_pos + types
    full = with_type if with_type is not None else with_pos if with_pos is not None else word
    post_ln = None if parts.layer_norm is None else layer_norm(full, parts)
    return {
        "word_embeddings": word,
        "word_plus_position": with_pos,
        "word_plus_position_plus_type": with_type,
        # token types added, positions left out (a pipeline that adds them itself)
        "word_plus_type": None if with_type is None else word + types,
        "post_layernorm": post_ln,
        "scaled_word_embeddings": word * np.sqrt(parts.width),
    }


def hidden_state_stages(reference: Mapping[str, np.ndarray], shape: tuple) -> dict:
    """The run's hidden states and ``last_hidden_state``: the tensors a pipeline most
    often takes by mistake, each by its name in the model's outputs. ``hidden_states[0]``
    is one of the stages rebuilt above where the model's embedding layer is only those
    (see :func:`closest`); it names the embedding output of the others (rotary or
    sinusoidal positions, offsets, extra tables)."""
    out: dict[str, np.ndarray] = {}
    for name, array in reference.items():
        wanted = hidden_state_index(name) is not None or name == "last_hidden_state"
        if wanted and tuple(np.shape(array)) == tuple(shape):
            out[name] = np.asarray(array, dtype=np.float64)
    return out


def positions_of(model: TFSide, parts: EmbeddingParts, batch: Batch) -> np.ndarray | None:
    if parts.position is None:
        return None
    rows = batch.position_ids
    if rows is None:
        rows = model.default_position_ids(batch.input_ids)
    return parts.position.astype(np.float64)[rows]


def types_of(parts: EmbeddingParts, batch: Batch) -> np.ndarray | None:
    if parts.token_type is None:
        return None
    rows = batch.token_type_ids
    if rows is None:
        rows = np.zeros_like(batch.input_ids)
    return parts.token_type.astype(np.float64)[rows]


def layer_norm(x: np.ndarray, parts: EmbeddingParts) -> np.ndarray:
    ln = parts.layer_norm
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + ln.eps) * ln.gamma + ln.beta


def distance(embeds: np.ndarray, stage: np.ndarray | None, valid: np.ndarray) -> float | None:
    """Relative L2 distance ``|E - S| / |S|`` over the real (unpadded) tokens."""
    if stage is None:
        return None
    diff = np.linalg.norm(embeds[valid] - stage[valid])
    scale = np.linalg.norm(stage[valid])
    return float(diff / scale) if scale > 0 else float(diff)


def closest(candidates: dict[str, float | None]) -> str:
    """The nearest candidate within MATCH_DISTANCE, else ``unknown``. Where a rebuilt
    stage fits as well as ``hidden_states[0]``, the stage wins (its name says what the
    tensor holds); the last hidden state is ``hidden_states[L]`` too: where both fit,
    the name a user would have taken (``last_hidden_state``) wins."""
    known = {k: v for k, v in candidates.items() if v is not None}
    best = min(known, key=known.get)
    if known[best] > MATCH_DISTANCE:
        return "unknown"
    if best == "hidden_states[0]":  # a rebuilt stage that fits says what it holds
        rebuilt = [k for k in EMBEDDING_STAGES if known.get(k, np.inf) <= MATCH_DISTANCE]
        best = min(rebuilt, key=known.get) if rebuilt else best
    last = known.get("last_hidden_state")
    if hidden_state_index(best) is not None and last is not None and last <= known[best]:
        return "last_hidden_state"
    return best


def is_word_rows(embeds: np.ndarray, rows: np.ndarray, valid: np.ndarray) -> bool:
    d = distance(embeds, rows.astype(np.float64), valid)
    return d is not None and d <= MATCH_DISTANCE


# ---------------------------------------------------------------------- id recovery


def recover_ids(
    embeds: np.ndarray, verdict: str, parts: EmbeddingParts, model: TFSide, batch: Batch
) -> np.ndarray:
    """Nearest word-embedding row by cosine, after undoing ``verdict``'s stage.

    Sums are undone by subtraction. LayerNorm is undone up to its per-token shift and
    scale, which cosine over centred vectors ignores: the token is the row ``w`` whose
    centred ``w + position + type`` points the same way as ``(E - beta) / gamma``.
    A hidden state after the embedding layer is not undone: its ids are not asked.
    """
    word = parts.word.astype(np.float64)
    flat = embeds.reshape(-1, embeds.shape[-1])
    if verdict == "post_layernorm":
        ln = parts.layer_norm
        offsets = _offsets(model, parts, batch, "word_plus_position_plus_type")
        normalised = (flat - ln.beta) / ln.gamma
        return _nearest_centred(normalised, word, offsets.reshape(flat.shape)).reshape(
            batch.input_ids.shape
        )
    undone = flat - _offsets(model, parts, batch, verdict).reshape(flat.shape)
    return _nearest(undone, word).reshape(batch.input_ids.shape)


def _offsets(model: TFSide, parts: EmbeddingParts, batch: Batch, verdict: str) -> np.ndarray:
    """What the stage added to the word embeddings (zeros for word/scaled/unknown)."""
    zeros = np.zeros(batch.input_ids.shape + (parts.width,))
    if verdict not in ("word_plus_position", "word_plus_position_plus_type", "word_plus_type"):
        return zeros
    positions = positions_of(model, parts, batch)
    added = zeros if positions is None or verdict == "word_plus_type" else positions
    types = types_of(parts, batch)
    if verdict != "word_plus_position" and types is not None:
        added = added + types
    return added


def _nearest(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
    unit_rows = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    out = np.empty(len(x), dtype=np.int64)
    for start in range(0, len(x), _CHUNK):
        out[start : start + _CHUNK] = np.argmax(x[start : start + _CHUNK] @ unit_rows.T, axis=1)
    return out


def _nearest_centred(x: np.ndarray, rows: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """argmax_v cos(x_i, centre(rows_v + offsets_i)) without building [n, vocab, width]."""
    rows_c = rows - rows.mean(axis=1, keepdims=True)
    off_c = offsets - offsets.mean(axis=1, keepdims=True)
    row_sq = (rows_c**2).sum(axis=1)
    out = np.empty(len(x), dtype=np.int64)
    for start in range(0, len(x), _CHUNK):
        xs, os = x[start : start + _CHUNK], off_c[start : start + _CHUNK]
        dot = xs @ rows_c.T + (xs * os).sum(axis=1, keepdims=True)
        norm_sq = row_sq[None, :] + 2 * (os @ rows_c.T) + (os**2).sum(axis=1, keepdims=True)
        out[start : start + _CHUNK] = np.argmax(dot / np.sqrt(np.maximum(norm_sq, 1e-24)), axis=1)
    return out


def mismatches(recovered: np.ndarray, ids: np.ndarray, valid: np.ndarray) -> dict[str, Any]:
    """The first differing positions, and a common offset if one explains them all
    (a shifted vocabulary or an off-by-one in the id mapping)."""
    where = np.argwhere((recovered != ids) & valid)
    first = [
        {
            "sequence": int(b),
            "position": int(s),
            "expected": int(ids[b, s]),
            "recovered": int(recovered[b, s]),
        }
        for b, s in where[:10]
    ]
    offsets = Counter(int(recovered[b, s]) - int(ids[b, s]) for b, s in where)
    common = offsets.most_common(1)
    offset = common[0][0] if common and common[0][1] == len(where) and len(where) > 1 else None
    return {"first": first, "offset": offset, "count": len(where)}

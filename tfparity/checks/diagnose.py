"""The diagnose check: what is this ``inputs_embeds`` tensor, and how to fix the pipeline.

A user feeds embeddings that give different outputs than the ids. The check rebuilds
every stage the embedding layer computes from the ids (raw word embeddings, plus
positions, plus token types, after the LayerNorm = ``hidden_states[0]``, and a copy
scaled by sqrt(width)) and names the stage the tensor is closest to; then it recovers
the ids the tensor encodes (nearest word-embedding row by cosine, after undoing that
stage), compares the two runs' outputs, and says what to change.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..adapters.interfaces.embeddings import EmbeddingParts
from ..adapters.interfaces.sides import TFSide
from ..compare import Tolerance, compare_output_batches, to_numpy
from ..errors import TfparityError
from ..inputs import Batch, check_limits, integer_ids
from ..results import Divergence, Report

# A stage is "it" when the tensor is this close to it (relative L2): loose enough for a
# float16 round trip (~5e-4), far below the gap between stages (order 0.1 to 1).
MATCH_DISTANCE = 1e-2
_CHUNK = 1024  # tokens per similarity block: bounds memory at _CHUNK x vocab floats


@dataclass(frozen=True)
class DiagnoseInputs:
    """The ids (with mask, type and position ids) and the embeddings the user fed."""

    batch: Batch
    embeds: np.ndarray


@dataclass(frozen=True)
class DiagnoseOptions:
    tolerance: Tolerance | None = None


@dataclass(frozen=True)
class InputNames:
    """What each input is called in messages: the API's parameter names, or the CLI's
    flags with their files (``--embeds emb.npy``)."""

    ids: str = "input_ids"
    embeds: str = "inputs_embeds"
    attention_mask: str = "attention_mask"
    token_type_ids: str = "token_type_ids"
    position_ids: str = "position_ids"


def diagnose_inputs(
    ids: Any,
    embeds: Any,
    *,
    attention_mask: Any = None,
    token_type_ids: Any = None,
    position_ids: Any = None,
    names: InputNames = InputNames(),
) -> DiagnoseInputs:
    """Check the arrays against each other (exit 2 if bad): ids range-checked in the
    dtype they arrive in, embeddings floating and finite, shapes matching. 1-D ids with
    2-D embeddings are taken as one sequence."""
    id_array = integer_ids(ids, names.ids)
    emb = to_numpy(embeds)
    if not np.issubdtype(emb.dtype, np.floating):
        raise TfparityError(f"{names.embeds} holds {emb.dtype}, not floating-point numbers.")
    _finite(emb, names.embeds)
    if id_array.ndim == 1 and emb.ndim == 2:
        id_array, emb = id_array[None], emb[None]
    if id_array.ndim != 2 or emb.ndim != 3:
        raise TfparityError(
            f"{names.ids} must be [batch, seq] and {names.embeds} [batch, seq, hidden]; got "
            f"{list(id_array.shape)} and {list(emb.shape)}."
        )
    if emb.shape[:2] != id_array.shape:
        raise TfparityError(
            f"{names.ids} {list(id_array.shape)} and {names.embeds} {list(emb.shape)} do not "
            "match: the embeddings must hold one vector per id ([batch, seq, hidden] for "
            "[batch, seq])."
        )
    extra = {
        "attention_mask": (attention_mask, names.attention_mask),
        "token_type_ids": (token_type_ids, names.token_type_ids),
        "position_ids": (position_ids, names.position_ids),
    }
    arrays: dict[str, np.ndarray | None] = {}
    for key, (value, name) in extra.items():
        arrays[key] = None if value is None else integer_ids(value, name)
        if arrays[key] is not None and arrays[key].shape != id_array.shape:
            raise TfparityError(
                f"{name} has shape {list(arrays[key].shape)}, but {names.ids} has "
                f"{list(id_array.shape)}; they must match."
            )
    mask = arrays["attention_mask"]
    batch = Batch(
        input_ids=id_array,
        attention_mask=np.ones_like(id_array) if mask is None else mask,
        token_type_ids=arrays["token_type_ids"],
        position_ids=arrays["position_ids"],
    )
    return DiagnoseInputs(batch, emb)


def _finite(embeds: np.ndarray, what: str) -> None:
    """NaN or Inf in the user's embeddings is the answer itself: no stage of the model
    makes them from finite weights, so say so instead of a verdict of "unknown"."""
    bad = ~np.isfinite(embeds)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise TfparityError(
            f"{what} holds {int(np.isnan(embeds).sum())} NaN and {int(np.isinf(embeds).sum())} "
            f"Inf values (first at index {where}): these embeddings are broken before the "
            "model sees them. Check how they were computed (overflow in float16? a division "
            "by zero? uninitialised memory?)."
        )


# ---------------------------------------------------------------------- the check


def check_diagnose(
    model: TFSide, inputs: DiagnoseInputs, options: DiagnoseOptions = DiagnoseOptions()
) -> Report:
    parts = model.embedding_parts()  # exit 2 on a side that does not expose them
    batch = inputs.batch
    check_limits(batch, model.limits)
    _finite(np.asarray(inputs.embeds), "inputs_embeds")
    _check_width(inputs.embeds, parts)
    valid = batch.attention_mask.astype(bool)
    embeds = inputs.embeds.astype(np.float64)
    stages = _stages(model, parts, batch)
    candidates = {name: _distance(embeds, stage, valid) for name, stage in stages.items()}
    verdict = _verdict(candidates)
    recovered = _recover_ids(embeds, verdict, parts, model, batch)
    if verdict == "unknown" and _is_word_rows(embeds, parts.word[recovered], valid):
        verdict = "word_embeddings"  # rows of the matrix, but of other ids (shifted vocab)
    match = recovered[valid] == batch.input_ids[valid]
    comparisons = _compare_outputs(model, inputs, options)
    outputs_match = all(c.passed for c in comparisons)
    ids_all_match = bool(match.all())
    passed = verdict == "word_embeddings" and ids_all_match and outputs_match
    mismatches = _mismatches(recovered, batch.input_ids, valid)
    fix = fix_advice(verdict, ids_all_match, outputs_match, parts, mismatches, inputs.embeds)
    details: dict[str, Any] = {
        "verdict": verdict,
        "candidates": candidates,
        "recovered_ids_match": float(match.mean()) if match.size else 1.0,
        "recovered_ids_mismatched": int((~match).sum()),
        "tokens": int(valid.sum()),
        "id_mismatches": mismatches["first"],
        "id_offset": mismatches["offset"],
        "outputs_match": outputs_match,
        "embeds_shape": list(inputs.embeds.shape),
        "embeds_dtype": str(inputs.embeds.dtype),
        "model_dtype": str(parts.word.dtype),
        "fix": fix,
    }
    return Report(
        check="diagnose",
        model=model.name,
        passed=passed,
        comparisons=comparisons,
        first_divergence=None
        if outputs_match
        else Divergence(0, "embeddings", "embeddings", fix["advice"]),
        details=details,
        notes=list(model.notes),
    )


def _check_width(embeds: np.ndarray, parts: EmbeddingParts) -> None:
    if embeds.shape[-1] != parts.width:
        raise TfparityError(
            f"--embeds is {embeds.shape[-1]} wide, but the model's word embeddings are "
            f"{parts.width} wide: these embeddings are not for this model (or not "
            "embeddings at all, e.g. a pooled output or a projection)."
        )


def _stages(model: TFSide, parts: EmbeddingParts, batch: Batch) -> dict[str, np.ndarray | None]:
    """Every stage the embedding layer computes from the ids (None: not in this model)."""
    word = parts.word.astype(np.float64)[batch.input_ids]
    positions = _positions(model, parts, batch)
    with_pos = None if positions is None else word + positions
    types = _types(parts, batch)
    with_type = None if with_pos is None or types is None else with_pos + types
    full = with_type if with_type is not None else with_pos if with_pos is not None else word
    post_ln = None if parts.layer_norm is None else _layer_norm(full, parts)
    return {
        "word_embeddings": word,
        "word_plus_position": with_pos,
        "word_plus_position_plus_type": with_type,
        "post_layernorm": post_ln,
        "scaled_word_embeddings": word * np.sqrt(parts.width),
    }


def _positions(model: TFSide, parts: EmbeddingParts, batch: Batch) -> np.ndarray | None:
    if parts.position is None:
        return None
    rows = batch.position_ids
    if rows is None:
        rows = model.default_position_ids(batch.input_ids)
    return parts.position.astype(np.float64)[rows]


def _types(parts: EmbeddingParts, batch: Batch) -> np.ndarray | None:
    if parts.token_type is None:
        return None
    rows = batch.token_type_ids
    if rows is None:
        rows = np.zeros_like(batch.input_ids)
    return parts.token_type.astype(np.float64)[rows]


def _layer_norm(x: np.ndarray, parts: EmbeddingParts) -> np.ndarray:
    ln = parts.layer_norm
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + ln.eps) * ln.gamma + ln.beta


def _distance(embeds: np.ndarray, stage: np.ndarray | None, valid: np.ndarray) -> float | None:
    """Relative L2 distance ``|E - S| / |S|`` over the real (unpadded) tokens."""
    if stage is None:
        return None
    diff = np.linalg.norm(embeds[valid] - stage[valid])
    scale = np.linalg.norm(stage[valid])
    return float(diff / scale) if scale > 0 else float(diff)


def _is_word_rows(embeds: np.ndarray, rows: np.ndarray, valid: np.ndarray) -> bool:
    distance = _distance(embeds, rows.astype(np.float64), valid)
    return distance is not None and distance <= MATCH_DISTANCE


def _verdict(candidates: dict[str, float | None]) -> str:
    known = {k: v for k, v in candidates.items() if v is not None}
    best = min(known, key=known.get)
    return best if known[best] <= MATCH_DISTANCE else "unknown"


# ---------------------------------------------------------------------- id recovery


def _recover_ids(
    embeds: np.ndarray, verdict: str, parts: EmbeddingParts, model: TFSide, batch: Batch
) -> np.ndarray:
    """Nearest word-embedding row by cosine, after undoing ``verdict``'s stage.

    Sums are undone by subtraction. LayerNorm is undone up to its per-token shift and
    scale, which cosine over centred vectors ignores: the token is the row ``w`` whose
    centred ``w + position + type`` points the same way as ``(E - beta) / gamma``.
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
    if verdict not in ("word_plus_position", "word_plus_position_plus_type"):
        return zeros
    positions = _positions(model, parts, batch)
    added = zeros if positions is None else positions
    types = _types(parts, batch)
    if verdict == "word_plus_position_plus_type" and types is not None:
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


def _mismatches(recovered: np.ndarray, ids: np.ndarray, valid: np.ndarray) -> dict[str, Any]:
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


def _compare_outputs(model: TFSide, inputs: DiagnoseInputs, options: DiagnoseOptions) -> list:
    """Every output of the embeds path against the ids path (padding excluded)."""
    batch = inputs.batch
    dtype = model.word_embeddings().dtype.as_numpy_dtype  # run in the model's own dtype
    reference = model.run(batch)
    actual = model.run(batch, inputs_embeds=inputs.embeds.astype(dtype))
    return compare_output_batches(
        [actual], [reference], masks=[batch.attention_mask], tolerance=options.tolerance
    )


# ---------------------------------------------------------------------- advice


def fix_advice(
    verdict: str,
    ids_all_match: bool,
    outputs_match: bool,
    parts: EmbeddingParts,
    mismatches: dict[str, Any],
    embeds: np.ndarray,
) -> dict[str, str]:
    """One or two sentences and one code line that repair the pipeline."""
    gather = f"inputs_embeds = {parts.gather_code}"
    dtype_note = ""
    if embeds.dtype != parts.word.dtype:
        dtype_note = (
            f" The embeddings are {embeds.dtype} but the model computes in "
            f"{parts.word.dtype}; cast them (or gather in the model's dtype)."
        )
    if verdict == "word_embeddings":
        if not ids_all_match:
            return {
                "advice": _id_advice(mismatches) + dtype_note,
                "code": f"{gather}  # the same input_ids you pass to the model",
            }
        if outputs_match:
            return {"advice": "Nothing to fix: these are the model's word embeddings.", "code": ""}
        return {
            "advice": "These are the right word embeddings, yet the outputs differ: pass the "
            "same attention_mask, token_type_ids and position_ids on both paths." + dtype_note,
            "code": "model(None, inputs_embeds=inputs_embeds, attention_mask=attention_mask, "
            "token_type_ids=token_type_ids)",
        }
    advice = {
        "word_plus_position": "These embeddings already include the position embeddings, "
        "which the model adds again. Feed the raw word embeddings instead.",
        "word_plus_position_plus_type": "These embeddings already include position and "
        "token-type embeddings, which the model adds again. Feed the raw word embeddings.",
        "post_layernorm": "These are the embedding layer's output, hidden_states[0] (word + "
        "position + token type, after LayerNorm); the model would add positions and types "
        "and normalise again. Gather the word-embedding matrix by the ids instead.",
        "scaled_word_embeddings": "These are the word embeddings multiplied by sqrt(hidden "
        f"size) = {np.sqrt(parts.width):.4g}; this model does not scale its inputs_embeds. "
        "Drop the scaling.",
        "unknown": "These embeddings match no stage the model computes from these ids. Check "
        "that they come from this checkpoint (same vocabulary and weights) and from these "
        "ids, and gather them from the model itself.",
    }[verdict]
    return {"advice": advice + dtype_note, "code": gather}


def _id_advice(mismatches: dict[str, Any]) -> str:
    text = (
        f"These are word embeddings, but of other ids at {mismatches['count']} position(s): "
        "the ids and the embeddings come from different tokenizations or vocabularies."
    )
    if mismatches["offset"] is not None:
        text += (
            f" Every mismatch is off by {mismatches['offset']:+d}: a shifted vocabulary or an "
            "off-by-one in the id mapping."
        )
    return text

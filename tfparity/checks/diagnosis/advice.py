"""The fix for what a diagnosis found: one or a few sentences, and one code line.

Each sentence states a fact the diagnosis measured (the stage, the permutation, the
shift, the token types, the rounding and its size), so the advice never asks the user
to change what they already do right.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...adapters.interfaces.embeddings import EmbeddingParts
from ...trace import hidden_state_index
from .causes import Rounding, RowLayout, Scale, TokenTypes, describe_types
from .result import Diagnosis
from .stages import MATCH_DISTANCE

# Below this relative distance the embeddings are the stage's own float32 values.
EXACT = 1e-7

_STAGES = {
    "word_plus_position": "These embeddings already include the position embeddings, "
    "which the model adds again. Feed the raw word embeddings instead.",
    "word_plus_position_plus_type": "These embeddings already include position and "
    "token-type embeddings, which the model adds again. Feed the raw word embeddings.",
    "word_plus_type": "These embeddings already include the token-type embeddings (not "
    "the position embeddings), which the model adds again. Feed the raw word embeddings.",
    "post_layernorm": "These are the embedding layer's output, hidden_states[0] (word + "
    "position + token type, after LayerNorm); the model would add positions and types "
    "and normalise again. Gather the word-embedding matrix by the ids instead.",
}


def fix_advice(found: Diagnosis, parts: EmbeddingParts, model: Any, batch: Any) -> dict[str, str]:
    """Advice for ``found`` on a model (``padding_aware_positions``, ``model_type``)."""
    gather = f"inputs_embeds = {parts.gather_code}"
    note = _rounding_note(found.rounding, parts) if found.verdict != "word_embeddings" else ""
    if found.layout is not None:
        advice = _stage_text(found.layout.stage, parts, found) + _layout(found.layout)
        return {"advice": advice.strip(), "code": gather}
    if found.token_types is not None:
        advice = _stage_text(found.verdict, parts, found) + _types(found.token_types, found)
        return {"advice": advice, "code": gather}
    if found.scale is not None:
        advice = _stage_text(found.scale.stage, parts, found) + _scaled(found.scale)
        return {"advice": advice.strip(), "code": gather}
    if found.verdict == "word_embeddings":
        return _word_advice(found, parts, model, batch, gather)
    if found.verdict == "unknown":
        return {"advice": _unknown(found), "code": gather}
    also = ""
    hs0 = found.candidates.get("hidden_states[0]")
    if found.verdict != "post_layernorm" and hs0 is not None and hs0 <= MATCH_DISTANCE:
        also = " In this model that is hidden_states[0], the embedding layer's output."
    return {"advice": _stage_text(found.verdict, parts, found) + also + note, "code": gather}


def _stage_text(stage: str, parts: EmbeddingParts, found: Diagnosis) -> str:
    if stage in _STAGES:
        return _STAGES[stage]
    if stage == "scaled_word_embeddings":
        return (
            "These are the word embeddings multiplied by sqrt(hidden size) = "
            f"{np.sqrt(parts.width):.4g}; this model does not scale its inputs_embeds. "
            "Drop the scaling."
        )
    if stage == "last_hidden_state":
        last = max(
            (k for n in found.candidates if (k := hidden_state_index(n)) is not None), default=None
        )
        index = "" if last is None else f" (= hidden_states[{last}])"
        return (
            f"These are last_hidden_state{index}, the output of the last layer: the model would "
            "run them through the embedding layer and every layer again. Feed the raw "
            "word embeddings."
        )
    k = hidden_state_index(stage)
    if k == 0:
        return (
            "These are hidden_states[0], the embedding layer's output: the model would run "
            "them through its embedding layer again. Gather the word-embedding matrix by "
            "the ids instead."
        )
    if k is not None:
        return (
            f"These are {stage}, the output of encoder layer {k - 1}: the model would run "
            "them through the embedding layer and every layer again. Feed the raw word "
            "embeddings."
        )
    return ""  # word_embeddings: the layout or types sentence says it all


def _layout(layout: RowLayout) -> str:
    what = "These are" if layout.stage == "word_embeddings" else "They are"
    if layout.kind == "permuted":
        return (
            f" {what} {layout.stage} of these ids, with the rows in another order: "
            f"embeddings row b holds ids row rows[b], rows = {layout.rows}. Keep the "
            f"embeddings in the order of the ids (inputs_embeds[np.argsort({layout.rows})] "
            "puts them back)."
        )
    shifts, padding = layout.shifts, layout.padding
    if all(s == p for s, p in zip(shifts, padding, strict=True)):
        cause = (
            "gathered from a left-padded batch while the ids are right-padded: each row is "
            "shifted right by its padding"
        )
    elif all(s == -p for s, p in zip(shifts, padding, strict=True)):
        cause = (
            "gathered from a right-padded batch while the ids are left-padded: each row is "
            "shifted left by its padding"
        )
    else:
        cause = "shifted along the sequence"
    return (
        f" {what} {layout.stage} of these ids, {cause} (shift per row, in positions: "
        f"{shifts}). "
        "Gather them from the same padded ids you feed (pad both on the same side)."
    )


def _scaled(scale: Scale) -> str:
    what = "These are" if scale.stage == "word_embeddings" else "They are"
    return (
        f" {what} {scale.stage} of these ids with every value multiplied by "
        f"{scale.factor:.4g} (divided out, they match at relative distance "
        f"{scale.distance:.2g}). Drop the factor: the model takes {scale.stage} as it "
        "computes them."
    )


def _types(found: TokenTypes, diagnosis: Diagnosis) -> str:
    return (
        f" They match with other token_type_ids than those given: {_types_where(found, diagnosis)}"
        ". Pass these token_type_ids (--token-type-ids TYPES.npy; details['token_type_ids'] "
        "holds them), the sentence pair's segments as the tokenizer returns them."
    )


def _types_where(found: TokenTypes, diagnosis: Diagnosis) -> str:
    return describe_types(found.types, diagnosis.valid)


def _word_advice(
    found: Diagnosis, parts: EmbeddingParts, model: Any, batch: Any, gather: str
) -> dict[str, str]:
    if not found.ids_all_match:
        return {
            "advice": _id_advice(found.mismatches) + _rounding_note(found.rounding, parts),
            "code": f"{gather}  # the same input_ids you pass to the model",
        }
    if found.outputs_match:
        return {"advice": "Nothing to fix: these are the model's word embeddings.", "code": ""}
    if found.rounding is not None:
        r = found.rounding
        return {
            "advice": f"These are the model's word embeddings rounded through {r.dtype}: they "
            f"differ from its {parts.word.dtype} table by up to {r.max_abs:.3g} (relative "
            f"{r.relative:.2g}), and the model carries that into its outputs. Gather and "
            f"feed them in {parts.word.dtype}: drop the cast to {r.dtype}.",
            "code": f"{gather}  # {parts.word.dtype}, not cast to {r.dtype}",
        }
    distance = found.candidates["word_embeddings"] or 0.0
    if distance > EXACT:
        return {
            "advice": "These are close to the model's word embeddings but not equal to them "
            f"(relative distance {distance:.2g}): something changed their values (noise, a "
            "normalisation, another dtype). Feed them as gathered.",
            "code": gather,
        }
    left_padded = bool((batch.attention_mask[:, 0] == 0).any())
    if model.padding_aware_positions and left_padded:
        return {
            "advice": f"These are the right word embeddings, but {model.model_type} makes "
            "padding-aware position ids from input_ids and sequential ones from "
            "inputs_embeds, so with left padding the two paths use different positions. Pad "
            "on the right, or pass position_ids (computed from input_ids) on both paths.",
            "code": "model(None, inputs_embeds=inputs_embeds, attention_mask=attention_mask, "
            "position_ids=position_ids)",
        }
    return {
        "advice": "These are the right word embeddings, yet the outputs differ: pass the "
        "same attention_mask, token_type_ids and position_ids on both paths.",
        "code": "model(None, inputs_embeds=inputs_embeds, attention_mask=attention_mask, "
        "token_type_ids=token_type_ids)",
    }


def _rounding_note(rounding: Rounding | None, parts: EmbeddingParts) -> str:
    if rounding is None:
        return ""
    return (
        f" Their values are also rounded through {rounding.dtype} (up to "
        f"{rounding.max_abs:.3g}); keep them in {parts.word.dtype}."
    )


def _unknown(found: Diagnosis) -> str:
    if found.ids_all_match:
        return (
            "These embeddings match no stage the model computes from these ids, yet each "
            "token's nearest word-embedding row is its own id: they encode these ids with "
            "other weights (another checkpoint of this vocabulary, e.g. before or after "
            "fine-tuning) or transformed. Gather them from this model."
        )
    return (
        "These embeddings match no stage the model computes from these ids, nor a hidden "
        "state. Check that they come from this checkpoint (same vocabulary and weights) and "
        "from these ids, and gather them from the model itself."
    )


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


def short_cause(found: Diagnosis) -> str | None:
    """What the fed tensor is, in one clause for a verdict line (the advice says how to
    fix it); None where the diagnosis could not name it, or nothing is wrong."""
    if found.layout is not None:
        lay = found.layout
        how = (
            f"with their rows in another order (rows {lay.rows})"
            if lay.kind == "permuted"
            else f"shifted along the sequence by {lay.shifts} (padding on another side)"
        )
        stage = lay.stage.replace("_", " ") if lay.stage == "word_embeddings" else lay.stage
        return f"the embeddings fed are {stage} {how}"
    if found.token_types is not None:
        return f"the embeddings fed are {found.verdict} with other token_type_ids than given"
    if found.scale is not None:
        s = found.scale
        return f"the embeddings fed are {s.stage} multiplied by {s.factor:.4g}"
    if found.verdict == "unknown":
        return None
    if found.verdict != "word_embeddings":
        return f"the embeddings fed are {found.verdict}, not the word embeddings"
    if not found.ids_all_match:
        m = found.mismatches
        off = f", every one off by {m['offset']:+d}" if m["offset"] is not None else ""
        return f"the embeddings fed are word embeddings of other ids at {m['count']} positions{off}"
    if found.rounding is not None:
        r = found.rounding
        rounded = f"rounded through {r.dtype} (up to {r.max_abs:.3g})"
        return f"the embeddings fed are word embeddings {rounded}"
    return None

"""One diagnosis of a user's ``inputs_embeds`` tensor, shared by ``tfparity diagnose``
and by the embeds check (``check_embeds(embeds_fn=...)``, ``assert_embeds_parity``).

It names what the tensor is whenever it comes from this model and these ids: a stage
of the embedding layer, a hidden state by index (``last_hidden_state`` included), a
stage with a sentence pair's token types left out, rows in another order, rows
shifted by padding on the other side, a stage multiplied by one factor, or word
embeddings rounded through a
half-precision dtype; a tensor from elsewhere stays ``unknown``. The hidden states
come from the run of the ids the caller made already (one forward pass).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from ...adapters.interfaces.sides import TFSide
from ...inputs import Batch
from .advice import fix_advice
from .causes import constant_scale, rounding, row_layout, token_types
from .result import Diagnosis
from .stages import (
    MATCH_DISTANCE,
    closest,
    distance,
    embedding_stages,
    hidden_state_stages,
    is_word_rows,
    mismatches,
    recover_ids,
)

__all__ = ["MATCH_DISTANCE", "Diagnosis", "diagnose_embeddings"]


def diagnose_embeddings(
    model: TFSide,
    batch: Batch,
    embeds: np.ndarray,
    reference: Mapping[str, np.ndarray],
    outputs_match: bool,
) -> Diagnosis:
    """What ``embeds`` is, given the ids ``batch`` and the model's run on them
    (``reference``, with its hidden states); ``outputs_match``: whether the two paths'
    outputs agreed. Raises (exit 2) on a side without embedding tables."""
    parts = model.embedding_parts()
    valid = batch.attention_mask.astype(bool)
    e = np.asarray(embeds, dtype=np.float64)
    tensors = {**embedding_stages(model, parts, batch), **hidden_state_stages(reference, e.shape)}
    candidates = {name: distance(e, t, valid) for name, t in tensors.items()}
    verdict = closest(candidates)
    layout = types = scale = None
    if verdict == "unknown" and (types := token_types(e, model, parts, batch, valid)):
        verdict = types.stage
        batch = replace(batch, token_type_ids=types.types)
    if verdict == "unknown" and (layout := row_layout(e, tensors, valid)):
        verdict = layout.stage
    if verdict == "unknown" and (scale := constant_scale(e, tensors, valid)):
        verdict = scale.stage
    unscaled = e if scale is None else e / scale.factor
    recovered = recover_ids(unscaled, verdict if layout is None else "unknown", parts, model, batch)
    if verdict == "unknown" and is_word_rows(e, parts.word[recovered], valid):
        verdict = "word_embeddings"  # rows of the matrix, but of other ids (shifted vocab)
    stage = tensors.get(verdict)
    found = Diagnosis(
        verdict=verdict,
        candidates=candidates,
        ids=batch.input_ids,
        recovered=recovered,
        valid=valid,
        mismatches=mismatches(recovered, batch.input_ids, valid),
        outputs_match=outputs_match,
        layout=layout,
        token_types=types,
        scale=scale,
        rounding=None
        if stage is None or layout or types or scale
        else rounding(np.asarray(embeds), stage, valid),
    )
    return replace(found, fix=fix_advice(found, parts, model, batch))

"""ELECTRA: BERT's layers behind an embedding projection (``embedding_size`` ->
``hidden_size``); the generator's MLM head projects back down."""

from __future__ import annotations

from .base import Architecture, LMHead, Positions, hf_classes
from .bert import FFN_WEIGHT, HINT_FIELDS, LAYOUT, TINY

ARCHITECTURES = (
    Architecture(
        model_type="electra",
        family="electra",
        **hf_classes("Electra"),
        tiny={**TINY, "embedding_size": 16},
        positions=Positions.ABSOLUTE,
        lm_head=LMHead(
            "dense (H->E) + {act} + LayerNorm, then x @ word_embeddings.T + bias[vocab]",
            lambda m, tf: lambda h: m.generator_lm_head(m.generator_predictions(h)),
        ),
        sublayers=LAYOUT,
        hint_fields=(*HINT_FIELDS, "embedding_size"),
        ffn_weight=FFN_WEIGHT,
    ),
)

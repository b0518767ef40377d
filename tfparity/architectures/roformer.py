"""RoFormer: BERT's layers with rotary position embeddings in attention (sinusoidal,
no position table in the embeddings)."""

from __future__ import annotations

from .base import Architecture, EmbeddingTables, Positions, hf_classes
from .bert import FFN_WEIGHT, HINT_FIELDS, TINY

ARCHITECTURES = (
    Architecture(
        model_type="roformer",
        family="roformer",
        **hf_classes("RoFormer"),
        tiny={**TINY, "embedding_size": 32},
        positions=Positions.ROTARY,
        embeddings=EmbeddingTables(position=None),
        hint_fields=(*HINT_FIELDS, "rotary_value"),
        ffn_weight=FFN_WEIGHT,
    ),
)

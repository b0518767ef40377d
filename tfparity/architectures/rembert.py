"""RemBERT: BERT with decoupled (narrow) input embeddings projected to the body's
width, and a separate output embedding width."""

from __future__ import annotations

from .base import Architecture, Positions, hf_classes
from .bert import FFN_WEIGHT, HINT_FIELDS, TINY

ARCHITECTURES = (
    Architecture(
        model_type="rembert",
        family="rembert",
        **hf_classes("RemBert"),
        tiny={**TINY, "input_embedding_size": 16, "output_embedding_size": 16},
        positions=Positions.ABSOLUTE,
        hint_fields=(*HINT_FIELDS, "input_embedding_size", "output_embedding_size"),
        ffn_weight=FFN_WEIGHT,
    ),
)

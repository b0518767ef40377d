"""RemBERT: BERT with decoupled (narrow) input embeddings projected to the body's
width, and a separate output embedding width."""

from __future__ import annotations

from .base import Architecture, Positions
from .bert import FFN_WEIGHT, HINT_FIELDS, TINY

ARCHITECTURES = (
    Architecture(
        model_type="rembert",
        family="rembert",
        tf_class="TFRemBertModel",
        pt_class="RemBertModel",
        tf_head_class="TFRemBertForMaskedLM",
        pt_head_class="RemBertForMaskedLM",
        tiny={**TINY, "input_embedding_size": 16, "output_embedding_size": 16},
        positions=Positions.ABSOLUTE,
        hint_fields=(*HINT_FIELDS, "input_embedding_size", "output_embedding_size"),
        ffn_weight=FFN_WEIGHT,
    ),
)

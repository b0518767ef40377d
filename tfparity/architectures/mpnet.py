"""MPNet: BERT-like layers with a relative position bias in attention on top of a
padding-aware absolute table (positions from ``input_ids`` count from
``padding_idx + 1``, as in RoBERTa)."""

from __future__ import annotations

from .base import Architecture, EmbeddingTables, Positions
from .bert import FFN_WEIGHT, TINY

ARCHITECTURES = (
    Architecture(
        model_type="mpnet",
        family="mpnet",
        tf_class="TFMPNetModel",
        pt_class="MPNetModel",
        tf_head_class="TFMPNetForMaskedLM",
        pt_head_class="MPNetForMaskedLM",
        tiny={**TINY, "max_position_embeddings": TINY["max_position_embeddings"] + 2},
        positions=Positions.PADDING_AWARE,
        embeddings=EmbeddingTables(token_type=None),
        hint_fields=("hidden_act", "layer_norm_eps", "relative_attention_num_buckets"),
        ffn_weight=FFN_WEIGHT,
    ),
)

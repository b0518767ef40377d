"""TAPAS: BERT's layers over table-aware inputs: seven token-type tables (segment,
column, row, rank, ...; ``type_vocab_sizes``), summed into the embeddings. Without
``token_type_ids`` every type is 0, on both paths. Localised to the layer."""

from __future__ import annotations

from .base import Architecture, EmbeddingTables, Positions, hf_classes
from .bert import FFN_WEIGHT, HINT_FIELDS, TINY

ARCHITECTURES = (
    Architecture(
        model_type="tapas",
        family="tapas",
        **hf_classes("Tapas"),
        tiny={**TINY, "type_vocab_sizes": [3, 16, 16, 2, 16, 16, 10]},
        positions=Positions.ABSOLUTE,
        # seven token-type tables, not one: none is read as "the" token-type table
        embeddings=EmbeddingTables(token_type=None),
        hint_fields=(*HINT_FIELDS, "type_vocab_sizes", "reset_position_index_per_cell"),
        ffn_weight=FFN_WEIGHT,
    ),
)

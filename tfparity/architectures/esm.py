"""ESM (protein language models): ESM-2's rotary positions and pre-LayerNorm blocks.

``token_dropout`` is off in the tiny config: with it on, TF ESM's embedding layer reads
``input_ids`` unconditionally, so the ``inputs_embeds`` path cannot run at all.
"""

from __future__ import annotations

from .base import Architecture, EmbeddingTables, Positions, hf_classes
from .bert import FFN_WEIGHT, TINY

ARCHITECTURES = (
    Architecture(
        model_type="esm",
        family="esm",
        **hf_classes("Esm"),
        tiny={
            **TINY,
            "position_embedding_type": "rotary",
            "token_dropout": False,
            "emb_layer_norm_before": False,
            "mask_token_id": 4,
        },
        positions=Positions.ROTARY,
        embeddings=EmbeddingTables(position=None, token_type=None, layer_norm=None),
        hint_fields=("hidden_act", "layer_norm_eps", "position_embedding_type", "token_dropout"),
        ffn_weight=FFN_WEIGHT,
    ),
)

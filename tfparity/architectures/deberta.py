"""DeBERTa (v1): disentangled attention with relative positions (``c2p``/``p2c``), no
absolute position table in the input (``position_biased_input=False``) and no token
types, as the released checkpoints are configured."""

from __future__ import annotations

from .base import Architecture, EmbeddingTables, Positions, hf_classes
from .bert import FFN_WEIGHT, TINY

HINT_FIELDS = (
    "hidden_act",
    "layer_norm_eps",
    "relative_attention",
    "pos_att_type",
    "position_biased_input",
    "max_relative_positions",
)
TINY_DEBERTA = {
    **TINY,
    "relative_attention": True,
    "position_biased_input": False,
    "pos_att_type": ["c2p", "p2c"],
    "max_relative_positions": -1,
    "type_vocab_size": 0,
}

ARCHITECTURES = (
    Architecture(
        model_type="deberta",
        family="deberta",
        **hf_classes("Deberta"),
        tiny=TINY_DEBERTA,
        positions=Positions.RELATIVE,
        embeddings=EmbeddingTables(position=None, token_type=None),
        hint_fields=HINT_FIELDS,
        ffn_weight=FFN_WEIGHT,
    ),
)

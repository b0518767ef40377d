"""DeBERTa-v2/v3: DeBERTa's disentangled attention with log-bucketed relative
positions, a shared key projection and normalised relative embeddings (the v3
settings)."""

from __future__ import annotations

from .base import Architecture, EmbeddingTables, Positions
from .bert import FFN_WEIGHT
from .deberta import HINT_FIELDS, TINY_DEBERTA

ARCHITECTURES = (
    Architecture(
        model_type="deberta-v2",
        family="deberta-v2",
        tf_class="TFDebertaV2Model",
        pt_class="DebertaV2Model",
        tf_head_class="TFDebertaV2ForMaskedLM",
        pt_head_class="DebertaV2ForMaskedLM",
        tiny={
            **TINY_DEBERTA,
            "position_buckets": 16,
            "norm_rel_ebd": "layer_norm",
            "share_att_key": True,
        },
        positions=Positions.RELATIVE,
        embeddings=EmbeddingTables(position=None, token_type=None),
        hint_fields=(*HINT_FIELDS, "position_buckets", "norm_rel_ebd", "share_att_key"),
        ffn_weight=FFN_WEIGHT,
    ),
)

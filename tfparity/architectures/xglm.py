"""XGLM: a causal, pre-LayerNorm decoder with sinusoidal positions counted from the
padding index, and word embeddings scaled by ``sqrt(d_model)`` on the ``input_ids``
path only: given ``inputs_embeds`` are taken as they are."""

from __future__ import annotations

import math
from typing import Any

from .base import Architecture, EmbeddingTables, IdsOnlyTransform, Positions, hf_classes


def _scaled(tf: Any, embeds: Any, ids: Any, config: Any) -> Any:
    return embeds * math.sqrt(config.d_model)


EMBED_SCALE = IdsOnlyTransform(
    reason="XGLM multiplies the word embeddings by embed_scale = sqrt(d_model) on the "
    "input_ids path only (scale_embedding=True); inputs_embeds are used as given",
    code="inputs_embeds *= math.sqrt(model.config.d_model)",
    apply=_scaled,
    applies=lambda config: bool(getattr(config, "scale_embedding", False)),
)

ARCHITECTURES = (
    Architecture(
        model_type="xglm",
        family="xglm",
        **hf_classes("XGLM", "ForCausalLM"),
        tiny=dict(
            d_model=32,
            num_layers=2,
            attention_heads=4,
            ffn_dim=64,
            max_position_embeddings=64,
            scale_embedding=True,
            bos_token_id=0,
            eos_token_id=2,
        ),
        positions=Positions.PADDING_AWARE,
        causal=True,
        embeddings=EmbeddingTables(position=None, token_type=None, layer_norm=None),
        ids_only=EMBED_SCALE,
        hint_fields=("activation_function", "scale_embedding", "layer_norm_epsilon"),
        ffn_weight="layers.{layer}.fc1.weight",
    ),
)

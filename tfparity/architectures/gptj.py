"""GPT-J: a causal decoder with rotary positions on part of each head
(``rotary_dim``) and attention and FFN in parallel from one LayerNorm."""

from __future__ import annotations

from .base import Architecture, EmbeddingTables, Positions, hf_classes

ARCHITECTURES = (
    Architecture(
        model_type="gptj",
        family="gptj",
        **hf_classes("GPTJ", "ForCausalLM"),
        tiny=dict(n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64, n_inner=64),
        positions=Positions.ROTARY,
        causal=True,
        embeddings=EmbeddingTables(position=None, token_type=None, layer_norm=None),
        hint_fields=("activation_function", "layer_norm_epsilon", "rotary_dim"),
        ffn_weight="h.{layer}.mlp.fc_in.weight",
    ),
)

"""XLNet: relative positions inside two-stream attention; no position table. Run as a
plain encoder (no memory), localised to the layer."""

from __future__ import annotations

from .base import Architecture, EmbeddingTables, LMHead, Positions, hf_classes

ARCHITECTURES = (
    Architecture(
        model_type="xlnet",
        family="xlnet",
        **hf_classes("XLNet", "LMHeadModel"),
        tiny=dict(d_model=32, n_layer=2, n_head=4, d_inner=64, use_mems_eval=False),
        positions=Positions.RELATIVE,
        # PyTorch's XLNet transposes the ids to [seq, batch] before embedding them
        embeddings=EmbeddingTables(
            position=None, token_type=None, layer_norm=None, pt_time_major=True
        ),
        lm_head=LMHead(
            "no transform: x @ word_embeddings.T + bias[vocab]", lambda m, tf: m.lm_loss
        ),
        hint_fields=("ff_activation", "layer_norm_eps", "attn_type", "bi_data", "clamp_len"),
        ffn_weight="layer.{layer}.ff.layer_1.weight",
    ),
)

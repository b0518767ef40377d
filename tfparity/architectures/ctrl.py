"""CTRL: a causal, pre-LayerNorm decoder with sinusoidal positions (computed, not a
table) and the embeddings scaled by ``sqrt(n_embd)`` on both paths."""

from __future__ import annotations

from .base import Architecture, EmbeddingTables, LMHead, Positions, hf_classes

ARCHITECTURES = (
    Architecture(
        model_type="ctrl",
        family="ctrl",
        **hf_classes("CTRL", "LMHeadModel"),
        tiny=dict(n_embd=32, n_layer=2, n_head=4, dff=64, n_positions=64),
        positions=Positions.ABSOLUTE,
        causal=True,
        embeddings=EmbeddingTables(position=None, token_type=None, layer_norm=None),
        # TFCTRLLMHeadModel's logits: hidden @ w.T, then its bias layer (no get_lm_head)
        lm_head=LMHead(
            "no transform: x @ w.T + bias[vocab] (the final LayerNorm is in the body)",
            lambda m, tf: (
                lambda h: m.bias_layer(tf.matmul(h, m.transformer.w.weights, transpose_b=True))
            ),
            tied_only="lm_head.weight",  # the TF head ties its matrix to w
        ),
        hint_fields=("layer_norm_epsilon", "dff"),
        ffn_weight="h.{layer}.ffn.0.weight",
    ),
)

"""XLM and FlauBERT: post-LayerNorm encoders with learned absolute positions (on the
main layer, beside the word matrix), per-layer ``attentions``/``ffns`` lists and a FFN
of 4x the width."""

from __future__ import annotations

from dataclasses import replace

from .base import Architecture, EmbeddingTables, Positions, hf_classes

TINY = dict(
    emb_dim=32,
    n_layers=2,
    n_heads=4,
    max_position_embeddings=64,
    pad_index=1,
    bos_index=0,
    eos_index=2,
    unk_index=3,
    mask_token_id=4,
)
XLM = Architecture(
    model_type="xlm",
    family="xlm",
    **hf_classes("XLM", "WithLMHeadModel"),
    tiny=TINY,
    positions=Positions.ABSOLUTE,
    embeddings=EmbeddingTables(token_type=None, layer_norm=None),
    takes_lengths=True,
    hint_fields=("gelu_activation", "layer_norm_eps", "sinusoidal_embeddings", "n_langs"),
    ffn_weight="ffns.{layer}.lin1.weight",
)

ARCHITECTURES = (
    XLM,
    replace(
        XLM,
        model_type="flaubert",
        family="xlm",
        **hf_classes("Flaubert", "WithLMHeadModel"),
        hint_fields=(*XLM.hint_fields, "pre_norm", "layerdrop"),
    ),
)

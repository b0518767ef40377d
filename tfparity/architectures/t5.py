"""T5 and mT5: relative position buckets in attention, RMS LayerNorm, no position
table. The checks run the encoder only (``TFT5EncoderModel``): there is no LM head to
check without the decoder. ``tfparity generate`` runs the encoder-decoder
(``TFT5ForConditionalGeneration``, ``pt_seq2seq_class``), judged by the decoder's tokens."""

from __future__ import annotations

from dataclasses import replace

from .base import Architecture, EmbeddingTables, Positions

TINY = dict(
    d_model=32,
    d_kv=8,
    d_ff=64,
    num_layers=2,
    num_heads=4,
    decoder_start_token_id=1,
    eos_token_id=2,
)

T5 = Architecture(
    model_type="t5",
    family="t5",
    tf_class="TFT5EncoderModel",
    pt_class="T5EncoderModel",
    tiny=TINY,
    positions=Positions.RELATIVE,
    pt_seq2seq_class="T5ForConditionalGeneration",
    decoder_layer="decoder.block.{layer}.",
    embeddings=EmbeddingTables(position=None, token_type=None, layer_norm=None),
    head_in_checkpoint=False,
    hint_fields=(
        "feed_forward_proj",
        "layer_norm_epsilon",
        "relative_attention_num_buckets",
        "relative_attention_max_distance",
        "d_kv",
    ),
    ffn_weight="encoder.block.{layer}.layer.1.DenseReluDense.wi.weight",
)

ARCHITECTURES = (
    T5,
    replace(
        T5,
        model_type="mt5",
        tf_class="TFMT5EncoderModel",
        pt_class="MT5EncoderModel",
        pt_seq2seq_class="MT5ForConditionalGeneration",
        tiny={**TINY, "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False},
        ffn_weight="encoder.block.{layer}.layer.1.DenseReluDense.wi_0.weight",
    ),
)

"""Gemma: a Llama-style decoder that scales embeddings by sqrt(hidden_size), uses
``1 + weight`` RMSNorm scales and a tanh-GELU gated FFN. No transformers TF class: its
Keras port is keras-hub's ``GemmaBackbone`` (``keras-hub:tiny:gemma``), whose blocks are
``GemmaDecoderBlock`` (``pre_ffw_norm``, ``ffw_linear``)."""

from __future__ import annotations

from .base import Architecture, Positions
from .keras_hub_layouts import KerasHubLayout, decoder_config, gemma_taps
from .llama import DECODER_TABLES, FFN_WEIGHT, HINT_FIELDS, LAYOUT, TINY

ARCHITECTURES = (
    Architecture(
        model_type="gemma",
        family="gemma",
        tf_class=None,
        pt_class="GemmaModel",
        pt_head_class="GemmaForCausalLM",
        tiny={**TINY, "rms_norm_eps": 1e-6, "tie_word_embeddings": True},
        positions=Positions.ROTARY,
        causal=True,
        embeddings=DECODER_TABLES,
        sublayers=LAYOUT,
        hint_fields=HINT_FIELDS + ("hidden_activation",),
        ffn_weight=FFN_WEIGHT,
        keras_hub=KerasHubLayout(
            backbone="GemmaBackbone",
            block_taps=gemma_taps,
            final_norm="final_normalization",
            effective_config=decoder_config,
        ),
    ),
)

"""Qwen3: a Llama-style decoder with RMSNorm on queries and keys (per head). No
transformers TF class: its Keras port is keras-hub's ``Qwen3Backbone``
(``keras-hub:tiny:qwen3``)."""

from __future__ import annotations

from .base import Architecture, KnownDifference, Positions
from .keras_hub_layouts import KerasHubLayout, decoder_config, gated_decoder_taps
from .llama import DECODER_TABLES, FFN_WEIGHT, HINT_FIELDS, LAYOUT, TINY

ARCHITECTURES = (
    Architecture(
        model_type="qwen3",
        family="qwen3",
        tf_class=None,
        pt_class="Qwen3Model",
        pt_head_class="Qwen3ForCausalLM",
        tiny={**TINY, "rms_norm_eps": 1e-6, "use_sliding_window": False},
        positions=Positions.ROTARY,
        causal=True,
        embeddings=DECODER_TABLES,
        sublayers=LAYOUT,
        hint_fields=HINT_FIELDS,
        ffn_weight=FFN_WEIGHT,
        keras_hub=KerasHubLayout(
            backbone="Qwen3Backbone",
            block_taps=gated_decoder_taps,
            final_norm="sequence_output_layernorm",
            effective_config=decoder_config,
            known_difference=KnownDifference(
                hidden_state=1,
                layer=0,
                component="attention",
                hint="computation itself differs",
                finding="keras-hub's Qwen3TransformerDecoder builds Qwen3Attention without "
                "layer_norm_epsilon, so q_norm/k_norm use 1e-5 whatever rms_norm_eps says "
                "(Qwen3 checkpoints: 1e-6)",
            ),
        ),
    ),
)

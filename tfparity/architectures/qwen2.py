"""Qwen (Qwen2): a Llama-style decoder with biases on the query, key and value
projections. No transformers TF class: its Keras port is keras-hub's ``QwenBackbone``
(``keras-hub:tiny:qwen2``)."""

from __future__ import annotations

from .base import Architecture, Positions
from .keras_hub_layouts import KerasHubLayout, decoder_config, gated_decoder_taps
from .llama import DECODER_TABLES, FFN_WEIGHT, HINT_FIELDS, LAYOUT, TINY, decoder_faults

ARCHITECTURES = (
    Architecture(
        model_type="qwen2",
        family="qwen2",
        tf_class=None,
        pt_class="Qwen2Model",
        pt_head_class="Qwen2ForCausalLM",
        tiny={**TINY, "rms_norm_eps": 1e-6, "use_sliding_window": False},
        positions=Positions.ROTARY,
        causal=True,
        embeddings=DECODER_TABLES,
        sublayers=LAYOUT,
        hint_fields=HINT_FIELDS,
        ffn_weight=FFN_WEIGHT,
        keras_hub=KerasHubLayout(
            backbone="QwenBackbone",
            block_taps=gated_decoder_taps,
            final_norm="sequence_output_layernorm",
            effective_config=decoder_config,
            faults=decoder_faults(),
        ),
    ),
)

"""Mistral: a causal, pre-RMSNorm decoder with rotary positions, grouped-query
attention and a gated (SwiGLU) FFN. TF's ``get_input_embeddings()`` is broken for it
(the main layer has no such method), so the word matrix is read as ``embed_tokens``."""

from __future__ import annotations

from .base import Architecture, EmbeddingTables, KnownDifference, Positions
from .keras_hub_layouts import KerasHubLayout, decoder_config

ARCHITECTURES = (
    Architecture(
        model_type="mistral",
        family="mistral",
        tf_class="TFMistralModel",
        pt_class="MistralModel",
        tf_head_class="TFMistralForCausalLM",
        pt_head_class="MistralForCausalLM",
        tiny=dict(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            intermediate_size=64,
            max_position_embeddings=64,
            sliding_window=None,
            bos_token_id=0,
            eos_token_id=2,
        ),
        positions=Positions.ROTARY,
        causal=True,
        embeddings=EmbeddingTables(
            word="embed_tokens", position=None, token_type=None, layer_norm=None
        ),
        hint_fields=(
            "hidden_act",
            "rms_norm_eps",
            "rope_theta",
            "sliding_window",
            "num_key_value_heads",
            "head_dim",
        ),
        ffn_weight="layers.{layer}.mlp.up_proj.weight",
        # keras-hub's Mistral is localised to the layer: the HF TF side has no sub-layer
        # layout for Mistral, and the registry keeps one layout per model type.
        keras_hub=KerasHubLayout(
            backbone="MistralBackbone",
            final_norm="sequence_output_layernorm",
            effective_config=decoder_config,
            known_difference=KnownDifference(
                hidden_state=0,
                layer="embeddings",
                component="embeddings",
                hint="casts embed_tokens.weight to float16",
                finding="convert_mistral.py casts the token embedding (and lm_head) to "
                "float16 before assigning them to float32 variables: a lossy conversion "
                "(embeddings off by up to ~6e-5 on the tiny model)",
            ),
        ),
    ),
)

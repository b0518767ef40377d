"""OPT: a causal, pre-LayerNorm decoder with learned positions made from the attention
mask (offset by 2), the same on both paths; ``word_embed_proj_dim`` projects the
embeddings in and out."""

from __future__ import annotations

from .base import Architecture, EmbeddingTables, Positions

ARCHITECTURES = (
    Architecture(
        model_type="opt",
        family="opt",
        tf_class="TFOPTModel",
        pt_class="OPTModel",
        tf_head_class="TFOPTForCausalLM",
        pt_head_class="OPTForCausalLM",
        tiny=dict(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            ffn_dim=64,
            max_position_embeddings=64,
            word_embed_proj_dim=32,
            bos_token_id=2,
            eos_token_id=2,
        ),
        positions=Positions.ABSOLUTE,
        causal=True,
        embeddings=EmbeddingTables(position=None, token_type=None, layer_norm=None),
        hint_fields=("activation_function", "do_layer_norm_before", "word_embed_proj_dim"),
        ffn_weight="decoder.layers.{layer}.fc1.weight",
    ),
)

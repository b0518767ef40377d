"""Gemma: a Llama-style decoder that scales embeddings by sqrt(hidden_size), uses
``1 + weight`` RMSNorm scales and a tanh-GELU gated FFN. No transformers TF class: its
Keras port is keras-hub's ``GemmaBackbone``, whose blocks are ``GemmaDecoderBlock``
(``pre_ffw_norm``, ``ffw_linear``)."""

from __future__ import annotations

from .keras_hub_layouts import gemma_taps, preset_fields
from .llama import HINT_FIELDS, keras_hub_decoder, pytorch_only_decoder

ARCHITECTURES = (
    pytorch_only_decoder(
        "gemma",
        "GemmaModel",
        "GemmaForCausalLM",
        tiny={"rms_norm_eps": 1e-6, "tie_word_embeddings": True},
        hint_fields=(*HINT_FIELDS, "hidden_activation"),
        keras_hub=keras_hub_decoder(
            "GemmaBackbone",
            block_taps=gemma_taps,
            final_norm="final_normalization",
            # convert_gemma.py doubles intermediate_size (keras-hub counts gate and up).
            preset_config=preset_fields(intermediate_size=lambda n: n // 2),
        ),
    ),
)

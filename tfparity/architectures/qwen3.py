"""Qwen3: a Llama-style decoder with RMSNorm on queries and keys (per head). No
transformers TF class: its Keras port is keras-hub's ``Qwen3Backbone``
(``keras-hub:tiny:qwen3``)."""

from __future__ import annotations

from .base import KnownDifference
from .llama import keras_hub_decoder, pytorch_only_decoder

QK_NORM_EPS = KnownDifference(
    hidden_state=1,
    layer=0,
    component="attention",
    hint="computation itself differs",
    finding="keras-hub's Qwen3TransformerDecoder builds Qwen3Attention without "
    "layer_norm_epsilon, so q_norm/k_norm use 1e-5 whatever rms_norm_eps says "
    "(Qwen3 checkpoints: 1e-6)",
)

ARCHITECTURES = (
    pytorch_only_decoder(
        "qwen3",
        "Qwen3Model",
        "Qwen3ForCausalLM",
        tiny={"rms_norm_eps": 1e-6, "use_sliding_window": False},
        keras_hub=keras_hub_decoder("Qwen3Backbone", known_difference=QK_NORM_EPS),
    ),
)

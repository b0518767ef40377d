"""Qwen (Qwen2): a Llama-style decoder with biases on the query, key and value
projections. No transformers TF class: its Keras port is keras-hub's ``QwenBackbone``
(``keras-hub:tiny:qwen2``)."""

from __future__ import annotations

from .llama import KERAS_HUB_FAULTS, keras_hub_decoder, pytorch_only_decoder

ARCHITECTURES = (
    pytorch_only_decoder(
        "qwen2",
        "Qwen2Model",
        "Qwen2ForCausalLM",
        tiny={"rms_norm_eps": 1e-6, "use_sliding_window": False},
        keras_hub=keras_hub_decoder("QwenBackbone", faults=KERAS_HUB_FAULTS),
    ),
)

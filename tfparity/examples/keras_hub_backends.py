"""Tiny keras-hub models saved to ``.keras``, for ``tfparity backends`` on the rotary
families (``--import tfparity.examples.keras_hub_backends``).

:func:`save` converts a tiny Hugging Face checkpoint (``tiny:<family>``'s) with
keras-hub's converter and saves its backbone, or its ``CausalLM`` (``task=True``), as a
``.keras`` file. ``skewed_backend="torch"`` saves a Llama backbone as
:class:`SkewedLlamaBackbone`: the same weights, with layer 1's rotary embedding 0.1% too
large on that backend only, read when the layer runs, so the same file is right on the
others: the kind of backend-specific fault the check must name, inside a rotary layer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # a backend's process has set its own

import keras  # noqa: E402
import keras_hub  # noqa: E402

SKEWED_LAYER = "transformer_layer_1/self_attention/rotary_embedding_layer"


@keras.saving.register_keras_serializable(package="tfparity_examples")
class SkewedLlamaBackbone(keras_hub.models.LlamaBackbone):
    """A Llama backbone whose layer 1 rotary embedding (:data:`SKEWED_LAYER`) scales its
    output by 1.001 when ``keras.backend.backend() == skewed_backend``."""

    def __init__(self, *args: Any, skewed_backend: str = "torch", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.skewed_backend = skewed_backend
        rotary = self.transformer_layers[1]._self_attention_layer.rotary_embedding_layer
        call = rotary.call

        def skewed(*a: Any, **k: Any) -> Any:
            out = call(*a, **k)
            return out * 1.001 if keras.backend.backend() == skewed_backend else out

        rotary.call = skewed

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "skewed_backend": self.skewed_backend}


def converted(family: str, task: bool = False) -> keras.Model:
    """``tiny:<family>``'s checkpoint converted by keras-hub: its backbone, or its
    ``CausalLM`` (no preprocessor: the file takes token ids)."""
    from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir

    directory = str(checkpoint_dir(family))
    if task:
        return keras_hub.models.CausalLM.from_preset(directory, preprocessor=None)
    return keras_hub.models.Backbone.from_preset(directory)


def save(
    path: str | Path, family: str = "llama", task: bool = False, skewed_backend: str | None = None
) -> Path:
    """The converted model (:func:`converted`) saved at ``path``; ``skewed_backend``: a
    Llama backbone saved as :class:`SkewedLlamaBackbone`, skewed on that backend."""
    model = converted(family, task)
    if skewed_backend is not None:
        config = {**model.get_config(), "skewed_backend": skewed_backend}
        skewed = SkewedLlamaBackbone.from_config(config)
        skewed.set_weights(model.get_weights())
        model = skewed
    model.save(path)
    return Path(path)

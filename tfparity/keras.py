"""Keras-side utilities: gather word embeddings by ``input_ids`` and feed them as
``inputs_embeds``.

Hugging Face TF models are tf-keras (Keras 2) models, so these are tf-keras layers.
Ids are validated against the vocabulary size on every device: on a GPU, ``tf.gather``
returns zeros for an out-of-range id instead of raising, which would silently give a
wrong answer.
"""

from __future__ import annotations

from typing import Any

from .adapters.hf_tf.gather import IdsOutOfRangeError, WordEmbeddingGather, tf_keras

__all__ = ["EmbedsModel", "IdsOutOfRangeError", "WordEmbeddingGather"]


class EmbedsModel(tf_keras.Model):
    """``ids -> gather -> model(inputs_embeds=...)``, to drop into a Keras pipeline.

    Call it with a dict holding ``input_ids`` and optionally ``attention_mask``,
    ``token_type_ids``, ``position_ids`` (or with ids alone). It returns what the
    wrapped model returns for the gathered embeddings, which is what the model itself
    returns for the ids.
    """

    def __init__(self, model: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.inner = model
        self.gather = WordEmbeddingGather.from_model(model)

    def call(self, inputs: Any, training: bool = False, **kwargs: Any) -> Any:
        extra = dict(inputs) if isinstance(inputs, dict) else {"input_ids": inputs}
        ids = extra.pop("input_ids")
        embeds = self.gather(ids)
        return self.inner(None, inputs_embeds=embeds, training=training, **extra, **kwargs)

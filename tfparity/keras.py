"""Keras-side utilities: gather word embeddings by ``input_ids`` and feed them as
``inputs_embeds``.

Hugging Face TF models are tf-keras (Keras 2) models, so these are tf-keras layers.
Ids are validated against the vocabulary size on every device: on a GPU, ``tf.gather``
returns zeros for an out-of-range id instead of raising, which would silently give a
wrong answer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .adapters.runtime import import_tf
from .adapters.tf_model import word_embedding_matrix
from .errors import TfparityError

tf = import_tf()
import tf_keras  # noqa: E402  (after TensorFlow's quiet import)


class IdsOutOfRangeError(TfparityError, ValueError):
    """An id outside ``[0, vocab_size)`` was given to :class:`WordEmbeddingGather`."""


class WordEmbeddingGather(tf_keras.layers.Layer):
    """``input_ids [batch, seq] -> embeddings [batch, seq, width]`` from a given matrix.

    The matrix is shared, not copied: the layer reads the model's own variable, so it
    always sees the model's current weights.
    """

    def __init__(self, matrix: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.matrix = matrix
        self.vocab_size = int(matrix.shape[0])

    @classmethod
    def from_model(cls, model: Any, **kwargs: Any) -> WordEmbeddingGather:
        """A gather over the word-embedding matrix of a HF TF ``model``."""
        return cls(word_embedding_matrix(model), **kwargs)

    def call(self, input_ids: Any) -> Any:
        ids = tf.cast(input_ids, tf.int32)
        if tf.executing_eagerly():
            self._check_eagerly(ids.numpy())
        else:  # in a graph: assertion ops that the gather waits for (they hold on GPUs too)
            checks = [
                tf.debugging.assert_non_negative(ids, message="input_ids must be >= 0"),
                tf.debugging.assert_less(
                    ids,
                    self.vocab_size,
                    message=f"input_ids must be < the vocabulary size {self.vocab_size}",
                ),
            ]
            with tf.control_dependencies(checks):
                ids = tf.identity(ids)
        return tf.gather(self.matrix, ids)

    def _check_eagerly(self, ids: np.ndarray) -> None:
        bad = (ids < 0) | (ids >= self.vocab_size)
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise IdsOutOfRangeError(
                f"input_ids out of range: {int(ids[where])} at index {where}; the vocabulary "
                f"has {self.vocab_size} rows, so ids must be in [0, {self.vocab_size - 1}]."
            )

    def compute_output_shape(self, input_shape: Any) -> Any:
        return tf.TensorShape(input_shape).concatenate([self.matrix.shape[1]])


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

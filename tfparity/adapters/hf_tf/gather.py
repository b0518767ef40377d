"""The Keras-side gather: ``input_ids -> word embeddings``, validated on every device.

Hugging Face TF models are tf-keras (Keras 2) models, so this is a tf-keras layer. Ids
are validated against the vocabulary size: on a GPU, ``tf.gather`` returns zeros for an
out-of-range id instead of raising, which would silently give a wrong answer. Where an
architecture's ``input_ids`` path changes the gathered embeddings (an embedding scale
applied to ids only), the gather applies the same change, so what it returns is what
the model feeds on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...architectures import IdsOnlyTransform, for_config
from ...errors import TfparityError
from ..runtime.imports import import_tf

tf = import_tf()
import tf_keras  # noqa: E402  (after TensorFlow's quiet import)


class IdsOutOfRangeError(TfparityError, ValueError):
    """An id outside ``[0, vocab_size)`` was given to :class:`WordEmbeddingGather`."""


class WordEmbeddingGather(tf_keras.layers.Layer):
    """``input_ids [batch, seq] -> embeddings [batch, seq, width]`` from a given matrix.

    The matrix is shared, not copied: the layer reads the model's own variable, so it
    always sees the model's current weights.
    """

    def __init__(
        self, matrix: Any, config: Any = None, rows_dtype: Any = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.matrix = matrix
        self.vocab_size = int(matrix.shape[0])
        self.model_config = config  # its architecture's ids-only change applies (None: none)
        self.rows_dtype = rows_dtype  # the model's embedding layer's compute dtype

    @classmethod
    def from_model(cls, model: Any, **kwargs: Any) -> WordEmbeddingGather:
        """A gather over the word-embedding matrix of a HF TF ``model``, with the change
        its ``input_ids`` path makes to the gathered rows (if its architecture has one)."""
        rows_dtype = getattr(embedding_layer(model), "compute_dtype", None)
        return cls(word_embedding_matrix(model), model.config, rows_dtype, **kwargs)

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
        rows = tf.gather(self.matrix, ids)
        if self.model_config is None:
            return rows
        return ids_path_rows(rows, ids, self.model_config, self.rows_dtype)

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


def ids_path_rows(rows: Any, ids: Any, config: Any, dtype: Any = None) -> Any:
    """Gathered word-embedding ``rows`` as the ``input_ids`` path feeds them on: with
    the architecture's ids-only change (XGLM's scale) made in ``dtype``, the embedding
    layer's compute dtype (float16 under mixed_float16), so both paths round alike;
    the rows as they are where the architecture has no such change."""
    change = ids_only_change(config)
    if change is None:
        return rows
    if dtype is not None:
        rows = tf.cast(rows, dtype)
    return change.apply(tf, rows, ids, config)


def ids_only_change(config: Any) -> IdsOnlyTransform | None:
    """The architecture's change to gathered embeddings on the ids path, if it applies."""
    change = for_config(config).ids_only
    return change if change is not None and change.applies(config) else None


def embedding_layer(model: Any) -> Any:
    """The layer that embeds ids in an HF TF ``model``: ``get_input_embeddings()``, or
    where its architecture says (Mistral's TF method is broken)."""
    word = for_config(model.config).embeddings.word
    if word is not None:
        return getattr(getattr(model, model.base_model_prefix), word)
    return model.get_input_embeddings()


def word_embedding_matrix(model: Any) -> Any:
    """The ``[vocab, width]`` matrix of :func:`embedding_layer`.

    HF TF models hold it in different places: BERT-like embedding layers and
    ``TFSharedEmbeddings`` as ``.weight``, Keras ``Embedding`` layers (GPT-2, T5) as
    ``.embeddings``.
    """
    tf = import_tf()
    layer = embedding_layer(model)
    for attr in ("weight", "embeddings"):
        value = getattr(layer, attr, None)
        if isinstance(value, tf.Variable) and len(value.shape) == 2:
            return value
    raise TypeError(
        f"{type(model).__name__}.get_input_embeddings() returned "
        f"{type(layer).__name__}, which holds no 2-D embedding matrix"
    )

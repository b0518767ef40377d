"""Keras 3 models shaped as people save them, for ``tfparity backends``: a subclassed
``keras.Model`` and a ``MultiHeadAttention`` classifier.

Importing this module registers :class:`SubclassedClassifier` and
:class:`GradientSkewed` (``--import tfparity.examples.keras_backends_shapes``).

- :class:`SubclassedClassifier`: Embedding, Dense (GELU), a custom residual layer,
  LayerNormalization and Dense logits called in Python (no layer graph). ``fault="jax"``
  makes its residual layer 0.1% off on JAX only (the example model's :class:`JaxSkewed`).
- :func:`build_attention`: Embedding, ``MultiHeadAttention`` (self-attention, whose key
  bias has a gradient of exactly 0: softmax is invariant to it), LayerNormalization,
  pooling and Dense logits. ``fault="jax_gradient"`` (or ``torch_gradient``) adds
  :class:`GradientSkewed` after the attention: its forward pass is the identity
  everywhere, its backward pass 0.1% too large on that backend only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # a backend's process has set its own

import keras  # noqa: E402
import numpy as np  # noqa: E402

from .keras_backends_model import RESIDUALS  # noqa: E402


@keras.saving.register_keras_serializable(package="tfparity_examples")
class SubclassedClassifier(keras.Model):
    """``logits(norm(residual(dense(embedding(ids)))))``, called in Python: Keras saves
    its config and weights but no graph, so its layers have no ``output`` to record."""

    def __init__(self, vocab: int = 64, width: int = 16, fault: str | None = None, **kw: Any):
        super().__init__(**kw)
        self.vocab, self.width, self.fault = vocab, width, fault
        self.embedding = keras.layers.Embedding(vocab, width)
        self.dense = keras.layers.Dense(2 * width, activation="gelu")
        self.residual = RESIDUALS[fault]()
        self.norm = keras.layers.LayerNormalization()
        self.logits = keras.layers.Dense(vocab)

    def call(self, ids: Any) -> Any:
        return self.logits(self.norm(self.residual(self.dense(self.embedding(ids)))))

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "vocab": self.vocab,
            "width": self.width,
            "fault": self.fault,
        }


@keras.saving.register_keras_serializable(package="tfparity_examples")
class GradientSkewed(keras.layers.Layer):
    """The identity forwards; backwards, the gradient 0.1% too large on ``backend``
    only: ``s + 1.001 * (x - s)`` with ``s = stop_gradient(x)`` is ``x`` exactly
    (``x - s`` is 0), and its derivative is 1.001."""

    def __init__(self, backend: str = "torch", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.backend = backend

    def call(self, x: Any) -> Any:
        if keras.backend.backend() != self.backend:
            return x
        held = keras.ops.stop_gradient(x)
        return held + 1.001 * (x - held)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "backend": self.backend}


def build_subclassed(fault: str | None = None, seed: int = 0) -> keras.Model:
    """:class:`SubclassedClassifier`, built on one batch of ids (its weights exist once
    it has run)."""
    keras.utils.set_random_seed(seed)
    model = SubclassedClassifier(fault=fault, name="subclassed")
    model(np.zeros((1, 4), "int32"))
    return model


def build_attention(fault: str | None = None, seed: int = 0) -> keras.Model:
    """Embedding -> MultiHeadAttention (self) + residual -> LayerNormalization ->
    average pooling -> Dense logits over 3 classes."""
    keras.utils.set_random_seed(seed)
    ids = keras.Input((None,), dtype="int32", name="token_ids")
    h = keras.layers.Embedding(64, 16, name="embedding")(ids)
    a = keras.layers.MultiHeadAttention(2, 8, name="mha")(h, h)
    if fault is not None:  # "jax_gradient": the gradient 0.1% off on JAX only
        a = GradientSkewed(fault.removesuffix("_gradient"), name="skew")(a)
    h = keras.layers.LayerNormalization(name="norm")(keras.layers.Add(name="add")([h, a]))
    h = keras.layers.GlobalAveragePooling1D(name="pool")(h)
    return keras.Model(ids, keras.layers.Dense(3, name="logits")(h), name="attention_example")


def save(path: str | Path, build: str = "attention", **kwargs: Any) -> Path:
    """Build ``build`` (``attention`` or ``subclassed``) and save it at ``path``."""
    makers = {"attention": build_attention, "subclassed": build_subclassed}
    makers[build](**kwargs).save(path)
    return Path(path)

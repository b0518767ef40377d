"""A small functional Keras 3 model with a custom layer, for ``tfparity backends``.

Importing this module registers :class:`ScaledResidual` (``--import
tfparity.examples.keras_backends_model``); :func:`build` makes the model and
:func:`save` writes it as a ``.keras`` file. ``fault="jax"`` builds the same model with
:class:`JaxSkewed`, a layer that scales its output by 1.001 on the JAX backend only,
the kind of backend-specific fault the check localises; ``fault="float32"`` with
:class:`Float32Skewed`, wrong on every backend at float32 and right at float64;
``fault="torch_gradient"`` with :class:`TorchGradientStopped`, whose forward pass is
right everywhere and whose gradient is wrong on torch only (``backends --gradients``).
:func:`build_classifier` makes a small classifier under a dtype policy
(``mixed_float16``, ``mixed_bfloat16``), its custom layer optionally
:class:`BackendSkewed` (any backend, any size). :mod:`.keras_hub_logits_fault` makes a
keras-hub ``CausalLM``'s logits 0.1% too large on torch only.

Models shaped as people save them (:func:`save_shaped`): :class:`SubclassedClassifier`,
a subclassed ``keras.Model`` (Embedding, Dense (GELU), the custom residual layer,
LayerNormalization and Dense logits called in Python: no layer graph; ``fault="jax"``
makes its residual layer 0.1% off on JAX only), and :func:`build_attention`, a
``MultiHeadAttention`` classifier (its key bias has a gradient of exactly 0: softmax is
invariant to it) whose ``fault="jax_gradient"`` (or ``torch_gradient``) adds
:class:`GradientSkewed` after the attention: the identity forwards, its backward pass
0.1% too large on that backend only. One module, so the test session's warm backend
processes serve them all (one ``--import``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # a backend's process has set its own

import keras  # noqa: E402
import numpy as np  # noqa: E402


@keras.saving.register_keras_serializable(package="tfparity_examples")
class ScaledResidual(keras.layers.Layer):
    """``x + alpha * tanh(x)``: a custom layer with a weight of its own."""

    def build(self, input_shape: Any) -> None:
        self.alpha = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="alpha")

    def call(self, x: Any) -> Any:
        return x + self.alpha * keras.ops.tanh(x)


@keras.saving.register_keras_serializable(package="tfparity_examples")
class JaxSkewed(ScaledResidual):
    """:class:`ScaledResidual`, but 0.1% too large on JAX: the backend is read when the
    layer runs, so the same file is right on TensorFlow and torch and wrong on JAX."""

    def call(self, x: Any) -> Any:
        y = super().call(x)
        return y * 1.001 if keras.backend.backend() == "jax" else y


@keras.saving.register_keras_serializable(package="tfparity_examples")
class Float32Skewed(ScaledResidual):
    """:class:`ScaledResidual`, but 0.1% too large when it computes in float32: wrong on
    every backend alike, right in the float64 referee (a dtype-dependent branch)."""

    def call(self, x: Any) -> Any:
        y = super().call(x)
        return y * 1.001 if self.compute_dtype == "float32" else y


@keras.saving.register_keras_serializable(package="tfparity_examples")
class TorchGradientStopped(ScaledResidual):
    """:class:`ScaledResidual` with ``tanh``'s input behind ``stop_gradient`` on torch
    only: the same forward pass on every backend, a backward pass on torch that drops
    the ``alpha * tanh(x)`` path to ``x`` (a backend-specific gradient)."""

    def call(self, x: Any) -> Any:
        stopped = keras.backend.backend() == "torch"
        inner = keras.ops.stop_gradient(x) if stopped else x
        return x + self.alpha * keras.ops.tanh(inner)


@keras.saving.register_keras_serializable(package="tfparity_examples")
class TorchSkewed(ScaledResidual):
    """:class:`ScaledResidual`, but 50% too large on torch: a backend-specific fault
    larger than any quantisation's noise, which ``backends --quantize`` must name."""

    def call(self, x: Any) -> Any:
        y = super().call(x)
        return y * 1.5 if keras.backend.backend() == "torch" else y


@keras.saving.register_keras_serializable(package="tfparity_examples")
class BackendSkewed(ScaledResidual):
    """:class:`ScaledResidual`, its output times ``scale`` on ``backend`` only (as
    :class:`JaxSkewed`, for any backend and size: a skew far above a half-precision
    policy's rounding, 1% under ``mixed_float16``, 10% under ``mixed_bfloat16``, or one
    within its RMSE bound that only the layer's scale shows, 0.1% and 1 + 1/128)."""

    def __init__(self, backend: str = "jax", scale: float = 1.001, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.backend, self.scale = backend, scale

    def call(self, x: Any) -> Any:
        y = super().call(x)
        return y * self.scale if keras.backend.backend() == self.backend else y

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "backend": self.backend, "scale": self.scale}


# The residual layer per fault: None (clean), "jax" (JAX only), "float32" (every backend),
# "torch_gradient" (torch's backward pass only), "torch" (torch's forward pass, by 50%).
RESIDUALS = {
    None: ScaledResidual,
    "jax": JaxSkewed,
    "torch": TorchSkewed,
    "float32": Float32Skewed,
    "torch_gradient": TorchGradientStopped,
}


@keras.saving.register_keras_serializable(package="tfparity_examples")
class MLPBlock(keras.layers.Layer):
    """``x + down(mix(up(x)))``: a block whose Dense and custom layers run inside its
    ``call``, outside the functional graph (as in a keras-hub transformer layer), so
    ``tfparity backends`` records them as sublayer taps (``block/up``, ``block/mix``,
    ``block/down``). ``fault`` picks ``mix``'s class from :data:`RESIDUALS`."""

    def __init__(self, fault: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fault = fault
        self.up = keras.layers.Dense(16, activation="gelu", name="up")
        self.mix = RESIDUALS[fault](name="mix")
        self.down = keras.layers.Dense(16, name="down")

    def build(self, input_shape: Any) -> None:
        # built here, not on first call, so that loading a saved file finds the weights
        self.up.build(input_shape)
        self.mix.build((*input_shape[:-1], 16))
        self.down.build((*input_shape[:-1], 16))

    def call(self, x: Any) -> Any:
        return x + self.down(self.mix(self.up(x)))

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "fault": self.fault}


def build_block(fault: str | None = None, seed: int = 0) -> keras.Model:
    """Embedding -> :class:`MLPBlock` -> LayerNormalization -> Dense logits."""
    keras.utils.set_random_seed(seed)
    ids = keras.Input((None,), dtype="int32", name="token_ids")
    h = keras.layers.Embedding(64, 16, name="embedding")(ids)
    h = MLPBlock(fault, name="block")(h)
    h = keras.layers.LayerNormalization(name="norm")(h)
    return keras.Model(ids, keras.layers.Dense(64, name="logits")(h), name="block_example")


def build_block_jax_fault() -> keras.Model:
    """:func:`build_block` with the block's ``mix`` sublayer 0.1% off on JAX only, as a
    callable MODEL: the fault is named at ``block/mix``, not at ``block``."""
    return build_block(fault="jax")


def build(vocab: int = 64, width: int = 16, fault: str | None = None, seed: int = 0) -> keras.Model:
    """Embedding -> Dense(gelu) -> custom layer -> LayerNormalization -> Dense logits."""
    keras.utils.set_random_seed(seed)
    ids = keras.Input((None,), dtype="int32", name="token_ids")
    h = keras.layers.Embedding(vocab, width, name="embedding")(ids)
    h = keras.layers.Dense(2 * width, activation="gelu", name="dense_1")(h)
    h = RESIDUALS[fault](name="residual")(h)
    h = keras.layers.LayerNormalization(name="norm")(h)
    logits = keras.layers.Dense(vocab, name="dense_2")(h)
    return keras.Model(ids, logits, name="backends_example")


def build_classifier(
    policy: str = "float32", skew: tuple[str, float] | None = None, seed: int = 0
) -> keras.Model:
    """Embedding -> Dense(gelu) -> custom layer -> LayerNormalization -> mean over
    positions -> Dense(3), built under the dtype policy ``policy`` as a user builds a
    mixed-precision model (``keras.config.set_dtype_policy`` first), the head float32 as
    Keras's mixed-precision guide advises; ``skew`` (backend, scale): the custom layer
    is :class:`BackendSkewed`."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        keras.utils.set_random_seed(seed)
        ids = keras.Input((None,), dtype="int32", name="token_ids")
        h = keras.layers.Embedding(64, 16, name="embedding")(ids)
        h = keras.layers.Dense(32, activation="gelu", name="dense_1")(h)
        residual = BackendSkewed(*skew, name="residual") if skew else None
        h = (residual or ScaledResidual(name="residual"))(h)
        h = keras.layers.LayerNormalization(name="norm")(h)
        h = keras.layers.GlobalAveragePooling1D(name="pool")(h)
        head = keras.layers.Dense(3, dtype="float32", name="head")(h)
        return keras.Model(ids, head, name=f"classifier_{policy}")
    finally:
        keras.config.set_dtype_policy(previous)


def save(path: str | Path, **kwargs: Any) -> Path:
    """Build the model and save it as a ``.keras`` file at ``path``."""
    build(**kwargs).save(path)
    return Path(path)


def build_clean() -> keras.Model:
    """The clean model, as a callable MODEL: ``tfparity backends
    tfparity.examples.keras_backends_model:build_clean``."""
    return build()


def build_jax_fault() -> keras.Model:
    """The model whose custom layer is 0.1% off on JAX only, as a callable MODEL."""
    return build(fault="jax")


def not_a_model() -> str:
    """A callable MODEL that returns no model (exit 2, naming what it returned)."""
    return "not a model"


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


def save_shaped(path: str | Path, build: str = "attention", **kwargs: Any) -> Path:
    """Build ``build`` (``attention`` or ``subclassed``) and save it at ``path``."""
    makers = {"attention": build_attention, "subclassed": build_subclassed}
    makers[build](**kwargs).save(path)
    return Path(path)

"""The float64 run of ``tfparity backends`` computes at float64 what a layer casts to a
fixed float32 (keras-hub's RMSNorm, rotary embedding, attention softmax), and leaves
unjudged, by name, a layer it cannot widen.

The worker's float64 run runs here, in this process (Keras 3 on TensorFlow), on small
functional models with custom layers shaped like keras-hub's: no backend process is
started (tests/cross_backend/test_backends_hub.py runs the rotary families on every backend).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

keras = pytest.importorskip("keras")

from tfparity.adapters.keras_backends import worker  # noqa: E402
from tfparity.adapters.keras_backends.float64 import Float64Scope  # noqa: E402


@keras.saving.register_keras_serializable(package="test_float64")
class CastNorm(keras.layers.Layer):
    """RMSNorm as keras-hub writes it: computed at a fixed float32, cast back, with an
    attention-style Softmax built inside at a fixed float32 (not in the config)."""

    def build(self, input_shape):
        self.softmax = keras.layers.Softmax(dtype="float32", name="attention_softmax")

    def call(self, x):
        h = keras.ops.cast(x, "float32")
        h = h * keras.ops.rsqrt(keras.ops.mean(h * h, axis=-1, keepdims=True) + 1e-6)
        h = h + keras.ops.arange(keras.ops.shape(h)[-1], dtype="float32") * 1e-3
        return self.softmax(keras.ops.cast(h, self.compute_dtype))


@keras.saving.register_keras_serializable(package="test_float64")
class OutsideOps(keras.layers.Layer):
    """Casts to float32 by a TensorFlow op, which no Keras dtype reaches."""

    def call(self, x):
        import tensorflow as tf

        return tf.cast(x, tf.float32)


def _model(layer):
    x = keras.Input((5,), name="x")
    h = keras.layers.Dense(5, name="pre")(x)
    h = layer(h)
    return keras.Model(x, keras.layers.Dense(3, name="head")(h))


def _exact(model, x):
    """The model computed in numpy at float64 from its float32 weights."""
    pre, _, head = (model.get_layer(n) for n in ("pre", "norm", "head"))
    h = x.astype(np.float64) @ np.asarray(pre.kernel, np.float64) + np.asarray(pre.bias)
    h = h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + 1e-6) + np.arange(5) * 1e-3
    h = np.exp(h - h.max(-1, keepdims=True))
    h = h / h.sum(-1, keepdims=True)
    return {"norm": h, "head": h @ np.asarray(head.kernel, np.float64) + np.asarray(head.bias)}


def _float64_run(model, x):
    with contextlib.ExitStack() as scope:
        try:
            return worker._run_at(keras, model, [x], "float64", scope)[1]
        finally:
            keras.config.set_dtype_policy("float32")  # as a served request is reset


@pytest.fixture(scope="module")
def cast_model():
    keras.utils.set_random_seed(0)
    model = _model(CastNorm(name="norm"))
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32) * 30
    return model, x


def test_fixed_float32_casts_compute_at_float64_in_the_float64_run(cast_model):
    model, x = cast_model
    run = _float64_run(model, x)
    exact = _exact(model, x)
    assert {str(a.dtype) for a in run.outputs.values()} == {"float64"}
    for name in ("norm", "head"):  # float64 rounding, not float32's (1e-7 relative)
        np.testing.assert_allclose(run.outputs[name], exact[name], rtol=1e-12, atol=1e-14)
    assert run.outputs["norm/attention_softmax"].dtype == np.float64
    (note,) = [n for n in run.notes if "float64 referee computed at float64" in n]
    assert "CastNorm" in note and "Softmax x1" in note


def test_without_the_scope_the_same_run_carries_float32_rounding(cast_model):
    """The break the scope repairs: the twin alone computes the casts at float32."""
    model, x = cast_model
    try:
        twin = worker._float64_twin(keras, model)
        run = worker._run(keras, twin, [x])
    finally:
        keras.config.set_dtype_policy("float32")
    assert run.outputs["norm/attention_softmax"].dtype == np.float32
    error = np.max(np.abs(run.outputs["head"] - _exact(model, x)["head"]))
    assert error > 1e-10  # float32 rounding, 100x above float64's


def test_the_scope_is_undone_after_the_run(cast_model):
    model, x = cast_model
    cast = keras.ops.cast
    with Float64Scope(keras) as scope:
        assert keras.config.floatx() == "float64"
        assert keras.ops.cast(np.ones(2, np.float32), "float32").dtype == "float64"
        assert keras.ops.view is not None
    assert keras.ops.cast is cast and keras.config.floatx() == "float32"
    assert keras.ops.cast(np.ones(2), "float32").dtype == "float32"
    assert scope.widened  # the test's own request, named by its caller


def test_a_layer_computing_float32_outside_keras_ops_is_named_and_left_unjudged():
    keras.utils.set_random_seed(0)
    model = _model(OutsideOps(name="outside"))
    x = np.random.default_rng(1).standard_normal((2, 5)).astype(np.float32)
    run = _float64_run(model, x)
    assert "outside" not in run.outputs and "outside" not in run.names
    assert run.names == ["pre", "head"]
    assert {str(a.dtype) for a in run.outputs.values()} == {"float64"}
    (note,) = [n for n in run.notes if n.startswith("not judged")]
    assert "outside computed at float32 in the float64 run on tensorflow" in note

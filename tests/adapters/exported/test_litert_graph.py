"""What a flatbuffer's tensor records say about reading them: an integer activation with
one scale is read as the real values it stands for; weights are not activations."""

from __future__ import annotations

import numpy as np

from tfparity.adapters.exported.litert_graph import TensorInfo


def tensor(dtype: str, scale: float | None = None, zero: int = 0, constant: bool = False):
    return TensorInfo(0, "t", (1, 2, 3), dtype, constant, scale is not None, scale, zero)


def test_an_int8_activation_reads_as_its_real_values():
    q = np.array([[-128, 0, 5, 127]], np.int8)
    real = tensor("INT8", scale=0.5, zero=-3).real(q)
    assert real.dtype == np.float32
    np.testing.assert_array_equal(real, [[-62.5, 1.5, 4.0, 65.0]])
    assert tensor("INT8", scale=0.5).activation


def test_float_tensors_read_as_they_are_and_weights_are_not_activations():
    x = np.array([1.5, -2.0], np.float32)
    assert tensor("FLOAT32").real(x) is x
    assert tensor("FLOAT32").activation
    assert not tensor("INT8", scale=0.1, constant=True).activation  # a quantised weight
    assert not tensor("INT8").activation  # no scale: its real values are unknown
    assert not tensor("INT32").activation

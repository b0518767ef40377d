"""The stored-vs-fresh variable comparison (tfparity/compare/requantisation.py) on
synthetic quantisations: identical variables pass, each kind of damage is named."""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.compare.requantisation import (
    QuantisedVariable,
    classify,
    compare_requantised,
    unpack_int4,
)

KERNEL = "transformer_layer_1/self_attention/query/kernel"
SCALE = KERNEL + "_scale"


def _quantised(seed: int = 0) -> dict[str, QuantisedVariable]:
    """An abs-max int8 quantisation per output channel of a (16, 4, 8) einsum kernel,
    as Keras makes it (scale shape (1, 1, 4, 8))."""
    w = np.random.default_rng(seed).normal(size=(16, 4, 8)).astype(np.float32)
    scale = (127.0 / np.abs(w).max(axis=0, keepdims=True)).astype(np.float32)
    ints = np.clip(np.round(w * scale), -127, 127).astype(np.int8)
    return {
        KERNEL: QuantisedVariable(KERNEL, ints),
        SCALE: QuantisedVariable(SCALE, scale[None]),
    }


def _damaged(path: str, values: np.ndarray) -> dict[str, QuantisedVariable]:
    stored = _quantised()
    stored[path] = QuantisedVariable(path, values)
    return stored


def test_identical_variables_reproduce_and_one_step_is_rounding():
    fresh = _quantised()
    assert compare_requantised(_quantised(), fresh).reproduces
    ints = fresh[KERNEL].values.astype(np.int16)
    ints[3, 1, 2] += 1  # one rounding step
    scale = fresh[SCALE].values * np.float32(1 + 1e-7)  # float32 rounding
    stored = {KERNEL: QuantisedVariable(KERNEL, ints.astype(np.int8)), SCALE: fresh[SCALE]}
    stored[SCALE] = QuantisedVariable(SCALE, scale)
    found = compare_requantised(stored, fresh)
    assert found.reproduces and found.identical == found.compared == 2


@pytest.mark.parametrize("factor, text", [(1.5, "scaled by 1.5"), (1.05, "scaled by 1.05")])
def test_a_uniform_factor_on_a_scale_is_named_with_its_digits(factor, text):
    fresh = _quantised()
    stored = _damaged(SCALE, fresh[SCALE].values * np.float32(factor))
    found = compare_requantised(stored, fresh)
    assert not found.reproduces and found.identical == 1
    (d,) = found.differences
    assert (d.path, d.layer, d.kind) == (
        SCALE,
        "transformer_layer_1/self_attention/query",
        "scaled",
    )
    assert d.detail == text and d.factor == pytest.approx(factor, rel=1e-5)


def test_a_factor_on_some_channels_of_a_scale_names_them():
    fresh = _quantised()
    scale = fresh[SCALE].values.copy()
    scale[0, 0, 2, 5] *= 1.5
    (d,) = compare_requantised(_damaged(SCALE, scale), fresh).differences
    assert d.kind == "scaled" and d.detail.startswith("scaled by 1.5 on 1 of 32 channels")
    assert d.channels == [[2, 5]]


def test_one_output_channel_negated_is_named_as_flipped_signs():
    fresh = _quantised()
    ints = fresh[KERNEL].values.copy()
    ints[:, 1, 3] = -ints[:, 1, 3]
    (d,) = compare_requantised(_damaged(KERNEL, ints), fresh).differences
    assert d.kind == "flipped" and d.channels == [[1, 3]]
    assert d.detail == "signs flipped on 1 of 32 output channels (channel (1, 3))"
    scale = fresh[SCALE].values.copy()
    scale[..., 0, 0] *= -1  # a negated scale flips its channel too
    (d,) = compare_requantised(_damaged(SCALE, scale), fresh).differences
    assert d.kind == "flipped" and d.channels == [[0, 0]]


def test_a_transposed_and_a_permuted_kernel_are_named():
    w = (np.arange(80) * 3 - 120).astype(np.int8).reshape(8, 10)  # neighbours 3 steps apart
    fresh = QuantisedVariable("dense/kernel", w)
    found = classify(QuantisedVariable("dense/kernel", w.T.copy()), fresh)
    assert found.kind == "transposed" and found.detail == "transposed (axes (1, 0))"
    square = np.arange(-50, 50, dtype=np.int8).reshape(10, 10)
    found = classify(
        QuantisedVariable("d/kernel", square.T.copy()), QuantisedVariable("d/kernel", square)
    )
    assert found.kind == "transposed"
    permuted = w[:, [1, 0, *range(2, 10)]]
    found = classify(QuantisedVariable("dense/kernel", permuted), fresh)
    assert found.kind == "permuted" and found.detail == "channels permuted (2 of 10 moved)"


def test_int_values_off_by_more_than_a_step_are_counted():
    fresh = _quantised()
    ints = fresh[KERNEL].values.astype(np.int16)
    ints[0, 0, 0] += 5
    ints[2, 3, 1] -= 2
    stored = _damaged(KERNEL, np.clip(ints, -127, 127).astype(np.int8))
    (d,) = compare_requantised(stored, fresh).differences
    assert d.kind == "int_steps" and d.differing == 2 and d.max_steps >= 2
    assert d.detail.startswith("2 of 512 int values off by more than one step")


def test_noise_on_a_scale_is_values_not_a_factor():
    fresh = _quantised()
    noise = np.random.default_rng(1).uniform(0.9, 1.1, size=fresh[SCALE].values.shape)
    (d,) = compare_requantised(_damaged(SCALE, fresh[SCALE].values * noise), fresh).differences
    assert d.kind == "values" and d.factor is None and d.differing == 32


def test_shape_dtype_and_missing_variables():
    fresh = _quantised()
    stored = _damaged(KERNEL, fresh[KERNEL].values.astype(np.float32))
    assert classify(stored[KERNEL], fresh[KERNEL]).kind == "dtype"
    stored = _damaged(KERNEL, fresh[KERNEL].values[:8])
    assert classify(stored[KERNEL], fresh[KERNEL]).kind == "shape"
    del stored[SCALE]
    found = compare_requantised(stored, fresh)
    kinds = {d.path: (d.kind, d.detail) for d in found.differences}
    assert kinds[SCALE] == ("missing", "only in the fresh quantisation")
    extra = {**_quantised(), "extra/kernel": QuantisedVariable("extra/kernel", np.ones(3))}
    (d,) = compare_requantised(extra, _quantised()).differences
    assert (d.kind, d.detail) == ("missing", "only in the stored file")


def test_int4_bytes_are_unpacked_before_counting_steps():
    values = np.array([[-3, 7, 2, -8], [1, 0, -1, 5]], dtype=np.int8)
    packed = ((values[:, 0::2] & 0x0F) | (values[:, 1::2] << 4)).astype(np.int8)
    assert unpack_int4(packed).tolist() == values.tolist()
    fresh = QuantisedVariable("d/kernel", packed, mode="int4")
    # one nibble off by one: a rounding step in int4, though the byte moves by 16
    bumped = values.copy()
    bumped[0, 1] = 6
    stored = ((bumped[:, 0::2] & 0x0F) | (bumped[:, 1::2] << 4)).astype(np.int8)
    assert classify(QuantisedVariable("d/kernel", stored, mode="int4"), fresh) is None
    as_bytes = QuantisedVariable("d/kernel", packed, mode="int8")
    assert (
        classify(QuantisedVariable("d/kernel", stored, mode="int8"), as_bytes).kind == "int_steps"
    )

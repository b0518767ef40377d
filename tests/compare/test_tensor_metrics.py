"""The per-tensor figures of a quantised comparison (MSE, SNR in dB, cosine) on values
computed by hand, padding left out, and the layers ranked by the error each adds."""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.compare.growth import LayerError, ranked_layers, worst_layer
from tfparity.compare.tensor_metrics import tensor_error, tensor_errors


def test_mse_and_snr_by_hand_with_padding_left_out():
    expected = np.array([[[3.0, 4.0], [100.0, 100.0]]])  # token 1 is padding
    actual = np.array([[[3.0, 5.0], [0.0, 0.0]]])
    mask = np.array([[1, 0]])
    e = tensor_error("h", [actual], [expected], [mask])
    assert e.mse == pytest.approx(0.5)  # (0 + 1) / 2 over the real token only
    assert e.snr_db == pytest.approx(10 * np.log10(25.0))  # 25 / 1
    assert e.cosine == pytest.approx((9 + 20) / (5 * np.sqrt(34)))


def test_an_exact_tensor_has_infinite_snr_and_a_noisier_one_a_lower_snr():
    rng = np.random.default_rng(0)
    ref = rng.normal(size=(2, 4, 8))
    mask = np.ones((2, 4))
    small = {"x": ref + 1e-3 * rng.normal(size=ref.shape), "ids": np.ones((2, 4), np.int64)}
    large = {"x": ref + 1e-1 * rng.normal(size=ref.shape)}
    exact = tensor_error("x", [ref], [ref], [mask])
    assert exact.snr_db == np.inf and exact.mse == 0 and exact.cosine == pytest.approx(1.0)
    (s,) = tensor_errors([small], [{"x": ref, "ids": np.ones((2, 4), np.int64)}], [mask])
    (big,) = tensor_errors([large], [{"x": ref}], [mask])
    assert s.name == "x"  # integer tensors are not figures of error
    assert s.snr_db > big.snr_db + 30 and s.mse < big.mse


def test_ranked_layers_put_the_one_that_adds_most_first():
    rows = [
        LayerError(0, "embeddings", 0.01, 0.01),
        LayerError(1, 0, 0.011, 0.001),
        LayerError(2, 1, 0.05, 0.039),
    ]
    ranked = ranked_layers(rows)
    assert [r.layer for r in ranked] == [1, "embeddings", 0]
    assert ranked[0] == worst_layer(rows)
    assert ranked_layers([]) == []

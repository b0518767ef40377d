"""A quantised weight read back through its scale is held within a step of its float
source: a correct per-channel int8 rounding passes, the same weight with one channel's
scale times 1.05 fails, named with its steps and its factor; numpy only."""

from __future__ import annotations

import numpy as np

from tfparity.compare.dequantised import DequantisedWeight, steps_off


def _quantised(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per output channel (rows), as ONNX Runtime's quantiser rounds."""
    step = np.abs(w).max(axis=1, keepdims=True) / 127
    return np.round(w / step), step


def test_a_correct_rounding_passes_and_one_scale_times_1_05_fails():
    w = np.random.default_rng(0).standard_normal((8, 64))
    q, step = _quantised(w)
    clean = DequantisedWeight("dense.weight", "dense_scale", 1, q * step, step)
    assert steps_off([clean], {"dense.weight": w}) == []
    damaged_step = step.copy()
    damaged_step[3] *= 1.05
    damaged = DequantisedWeight("dense.weight", "dense_scale", 1, q * damaged_step, damaged_step)
    (off,) = steps_off([damaged], {"dense.weight": w})
    assert 5 < off.steps < 7  # 0.05 x 127 steps at the channel's largest value, over 1.05
    assert 1.0 < off.factor < 1.05  # one channel of eight
    assert off.text().startswith("weight scale dense_scale reads dense.weight back as")

"""Per-tensor error figures in the terms a quantiser reports them: mean squared error,
signal-to-noise ratio in dB and cosine similarity, what ai-edge-quantizer's
``validate()`` gives per tensor for a float .tflite against its quantised one. The
budgets (:mod:`.budgets`) decide; these describe the same tensors the way a reader
coming from the quantiser expects. Valid tokens only, float64. Numpy only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .masks import leaf_mask


@dataclass(frozen=True)
class TensorError:
    """One tensor's error over every batch: ``snr_db`` is inf where it has none."""

    name: str
    mse: float
    snr_db: float
    cosine: float


def tensor_error(
    name: str,
    actual: Sequence[np.ndarray],
    expected: Sequence[np.ndarray],
    masks: Sequence[np.ndarray | None],
) -> TensorError:
    """``name``'s figures over batches (``actual[b]``: batch ``b``'s value), padding
    left out: MSE = mean((a - e)^2); SNR = 10 log10(sum(e^2) / sum((a - e)^2));
    cosine of the flattened tensors."""
    a_parts, e_parts = [], []
    for a, e, mask in zip(actual, expected, masks, strict=True):
        a, e = np.asarray(a, np.float64), np.asarray(e, np.float64)
        keep = leaf_mask(mask, np.shape(e), name)
        a_parts.append((a[keep] if keep is not None else a).ravel())
        e_parts.append((e[keep] if keep is not None else e).ravel())
    a, e = np.concatenate(a_parts), np.concatenate(e_parts)
    noise, signal = float(np.sum((a - e) ** 2)), float(np.sum(e * e))
    snr = np.inf if noise == 0 else 10 * np.log10(signal / noise) if signal > 0 else -np.inf
    norms = float(np.linalg.norm(a) * np.linalg.norm(e))
    cosine = float(a @ e / norms) if norms > 0 else float(noise == 0)
    return TensorError(name, noise / max(a.size, 1), float(snr), cosine)


def tensor_errors(
    actual: Sequence[Mapping[str, np.ndarray]],
    expected: Sequence[Mapping[str, np.ndarray]],
    masks: Sequence[np.ndarray | None],
) -> list[TensorError]:
    """Every float tensor both runs hold with one shape, in the expected run's order."""
    if not actual or not expected:
        return []
    names = [
        n
        for n in expected[0]
        if n in actual[0]
        and np.shape(expected[0][n]) == np.shape(actual[0][n])
        and np.issubdtype(np.asarray(expected[0][n]).dtype, np.floating)
    ]
    return [tensor_error(n, [a[n] for a in actual], [e[n] for e in expected], masks) for n in names]

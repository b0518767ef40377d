"""Keras layers' weights read into numpy for the numeric hints, on either Keras side
(tf-keras for Hugging Face TF models, Keras 3 for keras-hub): both hold a Dense's
kernel as ``[in, out]`` and a LayerNormalization's gamma, beta and epsilon alike."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...architectures import FeedForward
from ..interfaces.weight_map import FeedForwardWeights


def numpy_weights(dense: Any) -> tuple[np.ndarray, np.ndarray]:
    """A TF Dense (``kernel``) or Conv1D (``weight``, GPT's) layer's ``[in, out]`` matrix
    in float64 and its bias as ``[out]``, for numeric hints."""
    kernel = getattr(dense, "kernel", None)
    kernel = dense.weight if kernel is None else kernel
    return kernel.numpy().astype(np.float64), dense.bias.numpy().reshape(-1)


def norm_params(norm: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """A Keras LayerNormalization's gamma, beta and epsilon, for numeric hints."""
    return norm.gamma.numpy(), norm.beta.numpy(), float(norm.epsilon)


def feed_forward_weights(ffn: FeedForward | None) -> FeedForwardWeights | None:
    """``ffn``'s layers read into numpy, for the numeric hints."""
    if ffn is None:
        return None
    norm = None if ffn.norm is None else norm_params(ffn.norm)
    return FeedForwardWeights(numpy_weights(ffn.up), numpy_weights(ffn.down), norm, ffn.activation)

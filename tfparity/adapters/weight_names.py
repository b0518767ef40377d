"""TF weights by the PyTorch names they load from, in PyTorch's layout.

Weight hints and perturbed ports name a weight the way people read a checkpoint
(``encoder.layer.1.intermediate.dense.weight``); transformers' own name conversion
maps a TF variable to that name and says whether the kernel is transposed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class TFWeight:
    """A TF variable and how its value lines up with the PyTorch parameter."""

    variable: Any
    transposed: bool

    def value(self) -> np.ndarray:
        """The value in PyTorch's layout (transposed back; GPT-2's ``[1, n]`` biases
        are left to the caller, who knows the PyTorch shape)."""
        value = np.asarray(self.variable.numpy())
        return value.T if self.transposed else value


def tf_weights_by_pt_name(model: Any, with_base_prefix: bool = False) -> dict[str, TFWeight]:
    """``model``'s variables (an HF TF model) by PyTorch state-dict name: relative to the
    base model (``encoder.layer.0...``), or with its prefix (``bert.encoder...``)."""
    from transformers.modeling_tf_pytorch_utils import convert_tf_weight_name_to_pt_weight_name

    strip = "" if with_base_prefix else model.base_model_prefix + "."
    found = {}
    for var in model.weights:
        name, transpose = convert_tf_weight_name_to_pt_weight_name(
            var.name, start_prefix_to_remove=strip, tf_weight_shape=var.shape
        )
        found[name] = TFWeight(var, transpose.name != "NO")
    return found


def tf_weights_for(model: Any, pt_names: Any) -> dict[str, np.ndarray]:
    """TF values (PyTorch layout) for the PyTorch names ``pt_names`` use, matching
    whether those names carry the base-model prefix."""
    base = model.base_model_prefix + "."
    prefixed = any(k.startswith(base) for k in pt_names)
    weights = tf_weights_by_pt_name(model, with_base_prefix=prefixed)
    return {name: w.value() for name, w in weights.items() if name in pt_names}

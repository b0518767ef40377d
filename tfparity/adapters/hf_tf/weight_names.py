"""TF weights by the PyTorch names they load from, in PyTorch's layout.

Weight hints and perturbed ports name a weight the way people read a checkpoint
(``encoder.layer.1.intermediate.dense.weight``); transformers' own name conversion
maps a TF variable to that name and says whether the kernel is transposed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...results import Hint
from ..interfaces.weight_map import FeedForwardWeights, WeightMap


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
    return variables_by_pt_name(model.weights, model.base_model_prefix, with_base_prefix)


def variables_by_pt_name(
    variables: Any, base_model_prefix: str, with_base_prefix: bool = False
) -> dict[str, TFWeight]:
    """TF variables named as an HF TF model names them (``tf_bert_model/bert/...``: a
    model's, or those a SavedModel of one restores) by PyTorch state-dict name."""
    found = {}
    for var in variables:
        name, transposed = pt_name_of(var.name, var.shape, base_model_prefix, with_base_prefix)
        found[name] = TFWeight(var, transposed)
    return found


def pt_name_of(
    tf_name: str, shape: Any, base_model_prefix: str, with_base_prefix: bool = False
) -> tuple[str, bool]:
    """The PyTorch name of the TF variable named ``tf_name`` (an HF TF model's path,
    ``tf_bert_model/bert/...``) and whether its value is PyTorch's transposed."""
    from transformers.modeling_tf_pytorch_utils import convert_tf_weight_name_to_pt_weight_name

    strip = "" if with_base_prefix else base_model_prefix + "."
    name, transpose = convert_tf_weight_name_to_pt_weight_name(
        tf_name, start_prefix_to_remove=strip, tf_weight_shape=shape
    )
    return name, transpose.name != "NO"


def tf_weights_for(model: Any, pt_names: Any) -> dict[str, np.ndarray]:
    """TF values (PyTorch layout) for the PyTorch names ``pt_names`` use, matching
    whether those names carry the base-model prefix."""
    return variables_for(model.weights, model.base_model_prefix, pt_names)


def variables_for(variables: Any, base_model_prefix: str, pt_names: Any) -> dict[str, np.ndarray]:
    """:func:`tf_weights_for` over HF-named TF variables (see :func:`variables_by_pt_name`)."""
    prefixed = any(k.startswith(base_model_prefix + ".") for k in pt_names)
    weights = variables_by_pt_name(variables, base_model_prefix, with_base_prefix=prefixed)
    return {name: w.value() for name, w in weights.items() if name in pt_names}


@dataclass(frozen=True)
class HFWeightMap(WeightMap):
    """A Hugging Face TF model's weights: its variables carry the names transformers
    converts to PyTorch's, so each is found by the name it loads from."""

    model: Any
    config: Any  # the side's config (its model's, or the one it was loaded with)

    def weights_for(self, pt_weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return tf_weights_for(self.model, pt_weights)

    def unported(self, pt_weights: dict[str, np.ndarray], prefix: str, contains: str) -> list[Hint]:
        """The reference's untied LM head that this TF class cannot hold (GPT-2's
        ``lm_head.weight``), named as the cause where it is in scope."""
        from .gather import word_embedding_matrix
        from .untied_head import tied_only_weight, untied_head_hints

        cls, config = type(self.model).__name__, self.config
        name = tied_only_weight(config, cls)
        if name not in pt_weights or not name.startswith(prefix) or contains not in name:
            return []
        matrix = np.asarray(word_embedding_matrix(self.model))
        return untied_head_hints(config, cls, matrix, {name: pt_weights[name]})

    def feed_forward(self, layer: int) -> FeedForwardWeights | None:
        """The dense layers and norm around layer ``layer``'s activation, or None."""
        from ..tf_common.keras_weights import feed_forward_weights
        from . import taps

        return feed_forward_weights(taps.feed_forward(self.model, layer))

"""Language-model heads: tying of input/output embeddings, and what sits in between.

``output_embeddings(input_embeddings(ids))`` gives the ids back only if the head is a
bare product with the (tied) word matrix; most MLM heads put a dense layer, an
activation and a LayerNorm first. Which layers those are, and where the output
matrix lives, differ by architecture, so that knowledge lives here. ``model`` is a
:class:`~.tf_model.TFModel` (typed ``Any``: that module imports this one for its
``lm_head()``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import TfparityError
from ..interfaces.embeddings import LMHead
from ..runtime.imports import import_tf

# Class names whose checkpoints hold LM-head weights (config.architectures).
_HEAD_ARCHITECTURES = ("ForMaskedLM", "ForCausalLM", "LMHeadModel", "ForPreTraining", "WithLMHead")


def checkpoint_has_head(model: Any, spec: str) -> bool:
    """Whether ``spec`` can give a trained (or, for tiny:<model_type>, seeded) LM head.

    A checkpoint saved from a base class (``BertModel``, e.g. sentence-transformers'
    MiniLM) has no head weights: loading a head class would invent a random one.
    """
    from .loading import tf_lm_head_class

    try:
        tf_lm_head_class(model.config)
    except Exception:
        return False
    if not model.architecture.head_in_checkpoint:
        return False  # e.g. T5: tfparity runs the encoder only
    if spec.startswith("tiny:"):
        return True
    names = getattr(model.config, "architectures", None) or []
    return any(part in name for name in names for part in _HEAD_ARCHITECTURES)


def find_head(model: Any) -> LMHead | None:
    """The LM head of ``model``, or None for a base model (no output embeddings)."""
    output_layer = model.model.get_output_embeddings()
    if output_layer is None:
        return None
    output_var = _matrix_variable(output_layer)
    if output_var is None:  # MobileBERT's and RemBERT's heads build theirs from parts
        raise TfparityError(
            f"The LM head of {model.name} has an output layer ({type(output_layer).__name__}) "
            "with no 2-D output matrix tfparity can read, so the head's tying, round trip "
            "and logits cannot be judged."
        )
    input_var = model.word_embeddings()
    tied = output_var is input_var or _same_handle(output_var, input_var)
    description, apply = _head_parts(model)
    width_ok = int(input_var.shape[1]) == int(model.config.hidden_size)
    return LMHead(
        output_matrix=np.asarray(output_var.numpy()),
        tied=bool(tied),
        transform=description,
        logits=apply if width_ok else None,
    )


def _matrix_variable(layer: Any) -> Any | None:
    tf = import_tf()
    if isinstance(layer, tf.Variable):
        return layer
    for attr in ("weight", "embeddings", "kernel"):
        value = getattr(layer, attr, None)
        if isinstance(value, tf.Variable) and len(value.shape) == 2:
            return value
    return None


def _same_handle(a: Any, b: Any) -> bool:
    """Two Python objects for one variable (e.g. a mirrored wrapper) share the handle."""
    try:
        return a.handle is b.handle
    except AttributeError:
        return False


def _head_parts(model: Any) -> tuple[str, Callable[[np.ndarray], np.ndarray] | None]:
    """A description of the head and a function ``hidden [.., H] -> logits [.., vocab]``
    (the architecture's, else the model's own ``get_lm_head()`` undescribed)."""
    m, head = model.model, model.architecture.lm_head
    if head is None:
        found = m.get_lm_head()
        if found is None:  # TF OPT, OpenAI GPT: the logits are a product inside call()
            return f"not described for {model.model_type}, and the model names none", None
        return f"{type(found).__name__} (not described for {model.model_type})", _call(found)
    act = getattr(model.config, "hidden_act", None) or getattr(model.config, "activation", "")
    return head.description.format(act=act), _call(head.apply(m, import_tf()))


def _call(fn: Callable[[Any], Any]) -> Callable[[np.ndarray], np.ndarray]:
    """Run a head function on a numpy batch ``[batch, seq, H]`` and return numpy."""

    def apply(hidden: np.ndarray) -> np.ndarray:
        tf = import_tf()
        return np.asarray(fn(tf.constant(hidden, dtype=tf.float32)).numpy())

    return apply

"""TensorFlow gradients of a Hugging Face TF model for the gradients check: one
``tf.GradientTape`` run per batch and path (:mod:`..tf_common.tape`), differentiating
with respect to the embeddings fed in, every hidden state and every trainable weight,
the weights named as PyTorch names them."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...inputs import Batch
from ..interfaces.gradients import GradientRun, Objective
from ..runtime.imports import import_tf
from ..tf_common.tape import (
    EmbedsFn,
    differentiate,
    fed_embeddings,
    is_tensor,
    objective_terms,
    tf_loss,
    with_scalar,
)


def hf_gradients(
    model: Any, batch: Batch, objective: Objective, embeds: bool, embeds_fn: EmbedsFn | None
) -> GradientRun:
    """One tape run of a :class:`~.tf_model.TFModel` (its eager twin): the ``input_ids``
    path, or (``embeds``) the embeddings of ``embeds_fn(batch)`` (default: the model's
    own Keras-side gather) fed as ``inputs_embeds``; the batch is already checked
    against the model's limits (:meth:`TFSideBase.gradients`)."""
    tf = import_tf()
    model = model.eager()
    kwargs = model.call_kwargs(batch)
    variables = list(model.model.trainable_variables)
    with tf.GradientTape() as tape:
        fed = fed_embeddings(tf, tape, model, batch, embeds_fn) if embeds else None
        out = model.forward(None if embeds else batch.input_ids, fed, kwargs)
        hidden = list(out["hidden_states"])
        outputs = {k: v for k, v in out.items() if k != "hidden_states" and is_tensor(tf, v)}
        loss = tf_loss(outputs, objective_terms(objective, outputs, batch))
    run, grads = differentiate(tf, tape, loss, fed, hidden, variables)
    run.weights, run.word_embeddings = _by_pt_name(model, variables, grads)
    return with_scalar(run, outputs, batch)


def _by_pt_name(
    model: Any, variables: list[Any], grads: list[np.ndarray | None]
) -> tuple[dict[str, np.ndarray | None], str | None]:
    """The gradients by PyTorch name (relative to the base model, as
    :meth:`~..reference.pt_model.PTModel.weights` names them), kernels transposed back to
    PyTorch's layout where transformers' name conversion says so; and the word
    matrix's name. A variable with no PyTorch name keeps its TF name."""
    from .weight_names import tf_weights_by_pt_name

    known = {
        id(w.variable): (name, w.transposed)
        for name, w in tf_weights_by_pt_name(model.model).items()
    }
    found: dict[str, np.ndarray | None] = {}
    for variable, grad in zip(variables, grads, strict=True):
        name, transposed = known.get(id(variable), (variable.name, False))
        found[name] = grad.T if grad is not None and transposed else grad
    word = known.get(id(model.word_embeddings()))
    return found, None if word is None else word[0]

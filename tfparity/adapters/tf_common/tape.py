"""What a ``tf.GradientTape`` run of the gradients check does on either TF side (Hugging
Face TF models, keras-hub): the scalar of :class:`~..interfaces.sides.gradients.Objective`
in TensorFlow, the embeddings fed in (gathered *inside* the tape, so the word matrix
gets the gradient that flows back through the Keras-side gather, as in a training
step), and the tape's gradients as numpy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...compare import to_numpy
from ...inputs import Batch
from ..interfaces.gradients import GradientRun, Objective, Term
from ..runtime.imports import import_tf

EmbedsFn = Callable[[Batch], Any]


def tf_loss(outputs: dict[str, Any], terms: list[Term]) -> Any:
    """The scalar of :class:`~.imports.gradients.Objective` in TensorFlow (float32)."""
    tf = import_tf()
    total = tf.constant(0.0, tf.float32)
    for term in terms:
        x = tf.cast(outputs[term.output], tf.float32)
        if term.kind == "project":
            per = tf.reduce_sum(x * tf.constant(term.target), axis=-1)
        elif term.kind == "classes":
            per = tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=tf.constant(term.target), logits=x
            )
        else:
            per = tf.reduce_sum(tf.square(x - tf.constant(term.target)), axis=-1)
        total += _mean(tf, per, term.mask)
    return total


def _mean(tf: Any, per: Any, mask: np.ndarray | None) -> Any:
    if mask is None:
        return tf.reduce_mean(per)
    weights = tf.constant(mask)
    return tf.reduce_sum(per * weights) / max(float(mask.sum()), 1.0)


def fed_embeddings(tf: Any, tape: Any, model: Any, batch: Batch, embeds_fn: EmbedsFn | None) -> Any:
    """The embeddings fed in, made inside the tape (watched: a user's constant
    embeddings still get their own gradient, though none reaches the matrix)."""
    made = model.gather(batch.input_ids) if embeds_fn is None else embeds_fn(batch)
    fed = tf.cast(tf.convert_to_tensor(made), tf.float32)
    tape.watch(fed)
    return fed


def is_tensor(tf: Any, value: Any) -> bool:
    return isinstance(value, tf.Tensor)


def objective_terms(objective: Objective, outputs: dict[str, Any], batch: Batch) -> list[Term]:
    shapes = {k: tuple(v.shape) for k, v in outputs.items()}
    return objective.terms(shapes, batch.attention_mask)


def with_scalar(run: GradientRun, outputs: dict[str, Any], batch: Batch) -> GradientRun:
    run.scalar = Objective.describe(objective_terms(Objective(), outputs, batch))
    return run


def differentiate(
    tf: Any, tape: Any, loss: Any, fed: Any, hidden: list[Any], variables: list[Any]
) -> tuple[GradientRun, list[np.ndarray | None]]:
    """The tape's gradients as numpy, IndexedSlices densified (what an optimizer step
    applies): the run without its weights, and the weights' gradients in order."""
    sources = ([] if fed is None else [fed]) + hidden + variables
    grads = [dense(tf, g) for g in tape.gradient(loss, sources)]
    embeds_grad = grads.pop(0) if fed is not None else None
    run = GradientRun(
        loss=float(loss.numpy()),
        forward={f"hidden_states[{k}]": to_numpy(h) for k, h in enumerate(hidden)},
        hidden={f"hidden_states[{k}]": g for k, g in enumerate(grads[: len(hidden)])},
        inputs_embeds=embeds_grad,
    )
    return run, grads[len(hidden) :]


def dense(tf: Any, grad: Any) -> np.ndarray | None:
    if grad is None:
        return None
    if isinstance(grad, tf.IndexedSlices):
        grad = tf.convert_to_tensor(grad)
    return np.asarray(grad.numpy())

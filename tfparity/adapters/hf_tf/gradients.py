"""TensorFlow gradients for the gradients check: one ``tf.GradientTape`` run per batch
and path, on Hugging Face TF models and keras-hub backbones.

The tape differentiates the scalar of :mod:`.gradients` with respect to the
embeddings fed in, every hidden state the run returns (intermediate tensors of the
tape) and every trainable weight. On the ``inputs_embeds`` path the embeddings are
gathered *inside* the tape, so the word-embedding matrix receives the gradient that
flows back through the Keras-side gather, as it does in a training step.

Also here: gradient faults, for the catalogue (:mod:`tfparity.testing`): a gather
whose gradient is stopped or scaled, and a layer whose backward pass is scaled while
its forward pass is untouched.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ...compare import to_numpy
from ...inputs import Batch, check_limits
from ..interfaces.gradients import GradientRun, Objective, Term
from ..runtime.imports import import_tf

EmbedsFn = Callable[[Batch], Any]


# ----------------------------------------------------------------------------- the scalar


def tf_loss(outputs: dict[str, Any], terms: list[Term]) -> Any:
    """The scalar of :class:`~.gradients.Objective` in TensorFlow (float32)."""
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


# ----------------------------------------------------------------------------- HF TF models


def hf_gradients(
    model: Any, batch: Batch, objective: Objective, embeds: bool, embeds_fn: EmbedsFn | None
) -> GradientRun:
    """One tape run of a :class:`~.tf_model.TFModel` (its eager twin): the ``input_ids``
    path, or (``embeds``) the embeddings of ``embeds_fn(batch)`` (default: the model's
    own Keras-side gather) fed as ``inputs_embeds``."""
    tf = import_tf()
    model = model.eager()
    check_limits(batch, model.limits)
    kwargs = model.call_kwargs(batch)
    variables = list(model.model.trainable_variables)
    with tf.GradientTape() as tape:
        fed = _fed(tf, tape, model, batch, embeds_fn) if embeds else None
        out = model.forward(None if embeds else batch.input_ids, fed, kwargs)
        hidden = list(out["hidden_states"])
        outputs = {k: v for k, v in out.items() if k != "hidden_states" and _is_tensor(tf, v)}
        loss = tf_loss(outputs, _terms(objective, outputs, batch))
    run, grads = _differentiate(tf, tape, loss, fed, hidden, variables)
    run.weights, run.word_embeddings = _by_pt_name(model, variables, grads)
    return _with_scalar(run, outputs, batch)


def _by_pt_name(
    model: Any, variables: list[Any], grads: list[np.ndarray | None]
) -> tuple[dict[str, np.ndarray | None], str | None]:
    """The gradients by PyTorch name (relative to the base model, as
    :meth:`~.pt_model.PTModel.weights` names them), kernels transposed back to
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


def _fed(tf: Any, tape: Any, model: Any, batch: Batch, embeds_fn: EmbedsFn | None) -> Any:
    """The embeddings fed in, made inside the tape (watched: a user's constant
    embeddings still get their own gradient, though none reaches the matrix)."""
    made = model.gather(batch.input_ids) if embeds_fn is None else embeds_fn(batch)
    fed = tf.cast(tf.convert_to_tensor(made), tf.float32)
    tape.watch(fed)
    return fed


def _is_tensor(tf: Any, value: Any) -> bool:
    return isinstance(value, tf.Tensor)


def _terms(objective: Objective, outputs: dict[str, Any], batch: Batch) -> list[Term]:
    shapes = {k: tuple(v.shape) for k, v in outputs.items()}
    return objective.terms(shapes, batch.attention_mask)


def _with_scalar(run: GradientRun, outputs: dict[str, Any], batch: Batch) -> GradientRun:
    run.scalar = Objective.describe(_terms(Objective(), outputs, batch))
    return run


def _differentiate(
    tf: Any, tape: Any, loss: Any, fed: Any, hidden: list[Any], variables: list[Any]
) -> tuple[GradientRun, list[np.ndarray | None]]:
    """The tape's gradients as numpy, IndexedSlices densified (what an optimizer step
    applies): the run without its weights, and the weights' gradients in order."""
    sources = ([] if fed is None else [fed]) + hidden + variables
    grads = [_dense(tf, g) for g in tape.gradient(loss, sources)]
    embeds_grad = grads.pop(0) if fed is not None else None
    run = GradientRun(
        loss=float(loss.numpy()),
        forward={f"hidden_states[{k}]": to_numpy(h) for k, h in enumerate(hidden)},
        hidden={f"hidden_states[{k}]": g for k, g in enumerate(grads[: len(hidden)])},
        inputs_embeds=embeds_grad,
    )
    return run, grads[len(hidden) :]


def _dense(tf: Any, grad: Any) -> np.ndarray | None:
    if grad is None:
        return None
    if isinstance(grad, tf.IndexedSlices):
        grad = tf.convert_to_tensor(grad)
    return np.asarray(grad.numpy())


# ----------------------------------------------------------------------------- keras-hub


def backbone_gradients(
    model: Any,
    batch: Batch,
    objective: Objective,
    call: Callable[[Any], Any],
    embeds: bool,
    embeds_fn: EmbedsFn | None,
) -> tuple[GradientRun, list[Any], list[np.ndarray | None]]:
    """One tape run of a keras-hub backbone or task: ``call(fed)`` runs it (``fed``
    None: the ids path) and returns its outputs by name (``sequence_output``, and a
    task's ``logits``, which the objective then reads). Hidden states are the blocks'
    input and output tensors, as :class:`~.keras_hub_taps.BlockRecording` records their
    values, the last one the backbone's ``sequence_output``. Returns the run, the
    trainable variables and their gradients (the adapter maps them to PyTorch names
    through its converter)."""
    tf = import_tf()
    variables = list(model.backbone.trainable_variables)
    with tf.GradientTape() as tape, block_tensors(model.backbone) as blocks:
        fed = _fed(tf, tape, model, batch, embeds_fn) if embeds else None
        out = call(fed)
        seq = out["sequence_output"]
        hidden = [blocks.inputs[0], *blocks.outputs[:-1], seq] if blocks.inputs else [seq]
        outputs = {"last_hidden_state": seq}
        if "logits" in out:  # a task: the head's loss, as for HF head models
            outputs["logits"] = out["logits"]
        loss = tf_loss(outputs, _terms(objective, outputs, batch))
    run, grads = _differentiate(tf, tape, loss, fed, hidden, variables)
    return _with_scalar(run, outputs, batch), variables, grads


class _Blocks:
    def __init__(self) -> None:
        self.inputs: list[Any] = []
        self.outputs: list[Any] = []


@contextlib.contextmanager
def block_tensors(backbone: Any) -> Iterator[_Blocks]:
    """The tensors each transformer block takes and returns during the body (kept as
    tensors, so that the tape can differentiate with respect to them)."""
    from ..keras_hub.taps import unique_blocks

    blocks, restore = _Blocks(), []
    for block in unique_blocks(backbone):
        restore.append((block, block.call))
        block.call = _recording(block.call, blocks)
    try:
        yield blocks
    finally:
        for block, call in reversed(restore):
            block.call = call


def _recording(call: Callable, blocks: _Blocks) -> Callable:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        blocks.inputs.append(args[0])
        out = call(*args, **kwargs)
        blocks.outputs.append(out[0] if isinstance(out, (tuple, list)) else out)
        return out

    return wrapper


# ----------------------------------------------------------------------------- faults


def gradient_scaled(x: Any, factor: float) -> Any:
    """``x`` unchanged going forward; its gradient multiplied by ``factor`` going back
    (0: the gradient stopped, as ``tf.stop_gradient`` does)."""
    tf = import_tf()
    if factor == 0:
        return tf.stop_gradient(x)

    @tf.custom_gradient
    def scaled(value: Any) -> Any:
        return tf.identity(value), lambda upstream: upstream * factor

    return scaled(x)


def with_gather_gradient(model: Any, factor: float) -> Any:
    """``model`` whose Keras-side gather passes ``factor`` times the gradient to the
    word-embedding matrix (0: none), its embeddings unchanged: a broken embeds
    function that the embeds check cannot see, since the forward pass agrees."""
    gather = model.gather
    model.gather = lambda input_ids: gradient_scaled(gather(input_ids), factor)
    return model


def with_layer_backward(layer: Any, factor: float) -> None:
    """``layer`` (a Keras layer) whose input's gradient is ``factor`` times the true one,
    its outputs unchanged: a backward-only fault (a wrong custom gradient)."""
    call = layer.call

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if args:
            return call(gradient_scaled(args[0], factor), *args[1:], **kwargs)
        name = "hidden_states" if "hidden_states" in kwargs else next(iter(kwargs))
        return call(**{**kwargs, name: gradient_scaled(kwargs[name], factor)})

    layer.call = wrapper

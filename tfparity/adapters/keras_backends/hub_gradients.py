"""The gradients check's run inside a keras-hub worker (``gradients keras-hub:<SPEC>
--backend jax|torch``, :mod:`.hub_worker`'s ``gradients`` request): the scalar of
:class:`~tfparity.adapters.interfaces.gradients.Objective`, differentiated on whatever
backend ``KERAS_BACKEND`` chose, with respect to every hidden state and every trainable
weight.

Why this shape: the terms (seeded labels, projection, token mask) are the Objective's
numpy arrays, made here from the seed, the batch index and the run's output shapes, as
the TensorFlow side makes them, and :func:`keras_loss` is
:func:`~tfparity.adapters.tf_common.tape.tf_loss` term for term in ``keras.ops``, so
every backend differentiates the same function. The hidden states are the outputs of
the layers :func:`.hidden_states.hidden_state_layers` names (the blocks' inputs and outputs,
as the TF side's ``backbone_gradients`` records them). A layer output has no variable
to differentiate, so each of those layers' ``call`` adds a zero *probe* to its output
(the idea of :mod:`.gradients`, here at run time rather than by cloning the graph: a
CausalLM task calls its backbone as one nested layer, which a clone would not open);
the gradient with respect to the probe is the hidden state's. Differentiation is
:func:`.gradients.differentiate` on ``model.stateless_call`` (``jax.grad``,
``torch.autograd.grad``). No framework is imported at module level.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..interfaces.gradients import Objective, Term
from .gradients import as_numpy, differentiate
from .hidden_states import hidden_state_layers

HEADS = ("last_hidden_state", "logits")  # the outputs the Objective reads


def keras_loss(keras: Any, outputs: dict[str, Any], terms: list[Term]) -> Any:
    """The Objective's scalar in ``keras.ops`` (float32), as ``tf_loss`` computes it:
    a projection's ``sum(x * P, -1)``, cross-entropy of logits against labels, squared
    error of a regression head, each the mean over the mask's tokens."""
    ops = keras.ops
    total = ops.convert_to_tensor(0.0, "float32")
    for term in terms:
        x = ops.cast(outputs[term.output], "float32")
        if term.kind == "project":
            per = ops.sum(x * ops.convert_to_tensor(term.target), axis=-1)
        elif term.kind == "classes":
            labels = ops.expand_dims(ops.convert_to_tensor(term.target.astype(np.int32)), -1)
            picked = ops.squeeze(ops.take_along_axis(x, labels, axis=-1), -1)
            per = ops.logsumexp(x, axis=-1) - picked
        else:
            per = ops.sum(ops.square(x - ops.convert_to_tensor(term.target)), axis=-1)
        if term.mask is None:
            total = total + ops.mean(per)
        else:
            weights = ops.convert_to_tensor(term.mask)
            total = total + ops.sum(per * weights) / max(float(term.mask.sum()), 1.0)
    return total


class _Probes:
    """The probes' values for the call under way (None: a plain forward pass) and the
    hidden states each probed layer returned in it."""

    def __init__(self) -> None:
        self.deltas: list[Any] | None = None
        self.seen: dict[int, Any] = {}


@contextlib.contextmanager
def probed_layers(layers: list[Any]) -> Iterator[_Probes]:
    """Each of ``layers`` (hidden state ``k`` is layer ``k``'s output) adds probe ``k``
    to its output while the body runs, and records it."""
    probes, restore = _Probes(), []
    for k, layer in enumerate(layers):
        restore.append((layer, layer.call))
        layer.call = _probing(layer.call, k, probes)
    try:
        yield probes
    finally:
        for layer, call in reversed(restore):
            layer.call = call


def _probing(call: Any, k: int, probes: _Probes) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out = call(*args, **kwargs)
        if probes.deltas is not None:
            out = out + probes.deltas[k]
        probes.seen[k] = out
        return out

    return wrapper


def hub_gradients(
    keras: Any, model: Any, backbone: Any, feed: dict[str, Any]
) -> dict[str, np.ndarray]:
    """One gradients request on ``model`` (the backbone, or a CausalLM task around it):
    ``feed`` holds the model's inputs by name and the objective (``objective:seed``,
    ``objective:index``, ``objective:mask``). Returns ``loss``, ``scalar`` (the
    Objective in words), ``forward:<hidden>``, ``grad:<hidden>``, ``weight:<path>``
    (a weight off the scalar's path has none) and ``paths`` (every trainable path)."""
    objective = Objective(int(feed["objective:seed"]), int(feed["objective:index"]))
    task = model is not backbone
    inputs = {k: v for k, v in feed.items() if not k.startswith("objective:")}
    names = {a: n for a, n in hidden_state_layers(backbone).items() if a.startswith("hidden_")}
    aliases = list(names)
    with probed_layers([backbone.get_layer(names[a]) for a in aliases]) as probes:
        plain = _heads(model(inputs, training=False), task)
        forward = {a: keras.ops.convert_to_numpy(probes.seen[k]) for k, a in enumerate(aliases)}
        shapes = {k: tuple(v.shape) for k, v in plain.items()}
        terms = objective.terms(shapes, np.asarray(feed["objective:mask"]))
        trainable = list(model.trainable_variables)
        non_trainable = [v.value for v in model.non_trainable_variables]

        def loss(values: list) -> Any:
            probes.deltas = values[len(trainable) :]
            weights = values[: len(trainable)]
            out, _ = model.stateless_call(weights, non_trainable, inputs, training=False)
            return keras_loss(keras, _heads(out, task), terms)

        zeros = [keras.ops.zeros(forward[a].shape, "float32") for a in aliases]
        values = [v.value for v in trainable] + zeros
        grads = differentiate(keras.backend.backend())(loss, values)
        scalar = loss(values)
    arrays: dict[str, Any] = {
        "loss": np.asarray(keras.ops.convert_to_numpy(scalar), np.float64),
        "scalar": np.asarray(Objective.describe(terms)),
        "paths": np.asarray([v.path for v in trainable]),
    }
    for k, alias in enumerate(aliases):  # a gradient of None: off the scalar's path
        arrays[f"forward:{alias}"] = forward[alias]
        if grads[len(trainable) + k] is not None:
            arrays[f"grad:{alias}"] = as_numpy(keras, grads[len(trainable) + k], None)
    for v, g in zip(trainable, grads, strict=False):
        if g is not None:
            arrays[f"weight:{v.path}"] = as_numpy(keras, g, v)
    return arrays


def _heads(out: Any, task: bool) -> dict[str, Any]:
    """The outputs the Objective reads: a task's ``logits`` (its output), else the
    backbone's ``sequence_output`` (GPT-2's backbone returns it alone) as
    ``last_hidden_state``."""
    if task:
        return {"logits": out}
    return {"last_hidden_state": out["sequence_output"] if isinstance(out, dict) else out}

"""Gradients inside one Keras backend's process (``worker --gradients SEED``): the
gradient of a seeded scalar with respect to every layer's output, every trainable
weight and the model's float inputs, on whatever backend ``KERAS_BACKEND`` chose.

The scalar is ``sum over the model's outputs of sum(output * P)``, ``P`` a standard
normal projection drawn by ``numpy.random.default_rng(SEED)`` in output order: numpy's
generator gives every process the same ``P`` (cast to the run's dtype), so each backend
differentiates the same function. A plain sum would weight every logit alike; a random
projection makes each output element's gradient path count differently.

A layer's output has no variable to differentiate, so the model is cloned (the same
layer objects, so the same weights) with a zero *probe* added to every float layer
output: ``out + delta``, ``delta`` a zero trainable weight of the output's shape. The
forward pass is unchanged (adding zero is exact) and the gradient with respect to
``delta`` is the gradient with respect to that layer's output; it is what lets the
parent name the first layer counted backwards. Every backend then differentiates one
function, ``model.stateless_call(trainable, non_trainable, x)``: TensorFlow with
``tf.GradientTape``, JAX with ``jax.grad``, torch with ``torch.autograd.grad``.
Like the worker, this module imports no framework at module level.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

OUTPUT = "output"  # a row's suffix for the gradient w.r.t. a layer's output


def record_gradients(
    keras: Any, model: Any, inputs: list[np.ndarray], seed: int
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Every gradient by row name, and what the parent needs to judge them: ``rows``
    in reverse topological order (per layer, last first: the gradient w.r.t. its output
    ``LAYER:output``, then its weights by ``variable.path``; the float inputs' last,
    ``input:NAME``), ``layer_of`` (row -> layer) and ``consumers`` (layer -> the layers
    that take its output, whose backward pass makes its output's gradient)."""
    from .sublayers import has_graph

    graph = has_graph(model)
    probed, probes, consumers = _probed(keras, model, inputs) if graph else (model, {}, {})
    dtype = _float_dtype(model)
    trainable = list(probed.trainable_variables)
    floats = [k for k, a in enumerate(inputs) if np.asarray(a).dtype.kind == "f"]
    loss = _loss(keras, probed, inputs, floats, len(trainable), seed, dtype)
    values = [v.value for v in trainable] + [
        keras.ops.convert_to_tensor(inputs[k], dtype) for k in floats
    ]
    grads = differentiate(keras.backend.backend())(loss, values)
    by_id = {id(v): g for v, g in zip(trainable, grads, strict=False)}
    arrays: dict[str, np.ndarray] = {}
    layer_of: dict[str, str] = {}
    for layer, weights in _weights_backwards(model, graph):
        for name, probe in probes.get(layer, []):
            arrays[name] = as_numpy(keras, by_id[id(probe.delta)], probe.delta)
            layer_of[name] = layer
        for name, v in weights:
            arrays[name] = as_numpy(keras, by_id.get(id(v)), v)
            layer_of[name] = layer
    for k, g in zip(floats, grads[len(trainable) :], strict=True):
        name = f"input:{model.inputs[k].name if graph else k}"
        arrays[name] = np.asarray(keras.ops.convert_to_numpy(g))
        layer_of[name] = name
    facts = {"rows": list(arrays), "layer_of": layer_of, "consumers": consumers}
    return arrays, facts


def _weights_backwards(model: Any, graph: bool) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Each layer, last first, with its trainable weights by row name: a graph's layers
    with ``variable.path``; a subclassed model's sublayers (it has no graph to order or
    probe: its weights only) by their path from the model, as the forward taps name them
    (``residual/alpha``), for Keras names a sublayer of a subclassed model by a
    process-wide counter (``dense_3`` in the float64 twin)."""
    if graph:
        return [
            (layer.name, [(v.path, v) for v in layer.trainable_weights])
            for layer in reversed(model.layers)
        ]
    from .sublayers import nested_layers

    prefix = f"{model.name}/"
    nested = [(path.removeprefix(prefix), inner) for path, inner in nested_layers(model)]
    owner = {id(v): path for path, inner in nested for v in inner.trainable_weights}  # deepest
    return [
        (path, [(f"{owner[id(v)]}/{v.name}", v) for v in inner.trainable_weights])
        for path, inner in reversed(nested)
        if "/" not in path
    ]


def _float_dtype(model: Any) -> str:
    """The run's float dtype: the model's weights' (float64 in the referee's twin)."""
    dtypes = {str(v.dtype) for v in model.weights if "float" in str(v.dtype)}
    return "float64" if "float64" in dtypes else "float32"


def _probed(keras: Any, model: Any, inputs: list[np.ndarray]) -> tuple[Any, dict, dict]:
    """The model cloned with a zero probe on each float layer output (shapes from one
    forward run), the probes per layer name, and each layer's consumers."""
    shapes = _output_shapes(keras, model, inputs)
    probes: dict[str, list[tuple[str, Any]]] = {}
    consumers: dict[str, list[str]] = {}
    made_by: dict[int, str] = {}  # id of a probed tensor -> the layer that made it

    def call(layer: Any, *args: Any, **kwargs: Any) -> Any:
        for t in keras.tree.flatten((args, kwargs)):
            parent = made_by.get(id(t))
            if parent is not None and layer.name not in consumers.setdefault(parent, []):
                consumers[parent].append(layer.name)
        out = layer(*args, **kwargs)
        flat = keras.tree.flatten(out)
        probed = []
        for k, t in enumerate(flat):
            shape = shapes.get((layer.name, k))
            if shape is None or "float" not in str(t.dtype):
                probed.append(t)
                continue
            name = f"{layer.name}:{OUTPUT}" if len(flat) == 1 else f"{layer.name}:{OUTPUT}/{k}"
            probe = _Probe(keras)(shape, str(t.dtype), name=f"tfparity_probe_{len(made_by)}")
            probes.setdefault(layer.name, []).append((name, probe))
            p = probe(t)
            made_by[id(p)] = layer.name
            probed.append(p)
        return keras.tree.pack_sequence_as(out, probed)

    clone = keras.models.clone_model(model, clone_function=lambda layer: layer, call_function=call)
    return clone, probes, consumers


def _output_shapes(keras: Any, model: Any, inputs: list[np.ndarray]) -> dict:
    """(layer name, output index) -> that output's shape on these inputs, for the
    layers called once in ``model``'s own graph: its node's outputs, not ``layer.output``
    (a keras-hub task's ``token_embedding`` is first called inside its backbone, whose
    lookup output is not the task's logits)."""
    calls: dict[int, list[Any]] = {}
    for nodes in getattr(model, "_nodes_by_depth", {}).values():  # Keras's functional graph
        for node in nodes:
            calls.setdefault(id(node.operation), []).append(node)
    keys, tensors = [], []
    for layer in model.layers:
        if isinstance(layer, keras.layers.InputLayer):
            continue
        try:
            here = calls.get(id(layer)) if calls else None  # a Sequential: layer.output
            if here is not None and len(here) != 1:
                raise ValueError(layer.name)
            flat = keras.tree.flatten(layer.output if here is None else here[0].output_tensors)
        except (AttributeError, ValueError, RuntimeError):
            continue  # a layer called at several places: no probe, as the forward notes
        keys += [(layer.name, k) for k in range(len(flat))]
        tensors += flat
    fed = inputs[0] if len(inputs) == 1 else inputs
    produced = keras.tree.flatten(keras.Model(model.inputs, tensors)(fed, training=False))
    return {
        k: tuple(np.shape(keras.ops.convert_to_numpy(t)))
        for k, t in zip(keys, produced, strict=True)
    }


def _Probe(keras: Any) -> Callable[..., Any]:  # noqa: N802 - a class made per process
    """The probe layer class (made once Keras is imported): ``x + delta``, ``delta`` a
    zero trainable weight of ``x``'s concrete shape."""

    class Probe(keras.layers.Layer):
        def __init__(self, shape: tuple[int, ...], dtype: str, **kwargs: Any) -> None:
            super().__init__(dtype=dtype, **kwargs)
            self.delta = self.add_weight(shape=shape, initializer="zeros", name="delta")

        def call(self, x: Any) -> Any:
            return x + self.delta

        def compute_output_shape(self, shape: Any) -> Any:
            return shape  # the symbolic shape (None batch): delta's is concrete

    return Probe


def _loss(
    keras: Any, model: Any, inputs: list, floats: list[int], n: int, seed: int, dtype: str
) -> Callable[[list], Any]:
    """The seeded scalar as a function of (trainable values + float inputs)."""
    from .sublayers import has_graph

    non_trainable = [v.value for v in model.non_trainable_variables]
    # stateless_call hands its keywords to call itself: a subclassed call may take none
    takes = "training" in inspect.signature(model.call).parameters or has_graph(model)
    mode = {"training": False} if takes else {}
    projections: list[Any] = []

    def loss(values: list) -> Any:
        given = list(inputs)
        for k, x in zip(floats, values[n:], strict=True):
            given[k] = x
        # in the model's own input structure: a keras-hub backbone takes a dict
        fed = keras.tree.pack_sequence_as(model.input, given) if has_graph(model) else given
        fed = fed[0] if isinstance(fed, list) and len(fed) == 1 else fed
        outputs, _ = model.stateless_call(values[:n], non_trainable, fed, **mode)
        flat = keras.tree.flatten(outputs)
        if not projections:  # drawn once, in output order, from the seed alone
            rng = np.random.default_rng(seed)
            drawn = [rng.standard_normal(tuple(o.shape)).astype(dtype) for o in flat]
            projections.extend(keras.ops.convert_to_tensor(p, dtype) for p in drawn)
        return sum(keras.ops.sum(o * p) for o, p in zip(flat, projections, strict=True))

    return loss


def differentiate(backend: str) -> Callable[[Callable, list], list]:
    """``grad(loss, values)``: the gradients of ``loss(values)`` on ``backend``."""
    if backend == "jax":
        import jax

        return lambda loss, values: jax.grad(loss)(values)
    if backend == "torch":
        import torch

        def by_torch(loss: Callable, values: list) -> list:
            leaves = [v.detach().clone().requires_grad_(True) for v in values]
            return list(torch.autograd.grad(loss(leaves), leaves, allow_unused=True))

        return by_torch
    import tensorflow as tf

    def by_tape(loss: Callable, values: list) -> list:
        leaves = [tf.convert_to_tensor(v) for v in values]
        with tf.GradientTape() as tape:
            tape.watch(leaves)
            scalar = loss(leaves)
        return tape.gradient(scalar, leaves)

    return by_tape


def as_numpy(keras: Any, grad: Any, variable: Any) -> np.ndarray:
    """A gradient as numpy; None (the scalar does not depend on it) as zeros."""
    if grad is None:
        return np.zeros(tuple(variable.shape), str(variable.dtype))
    if hasattr(grad, "indices") and hasattr(grad, "dense_shape"):  # TF's IndexedSlices
        import tensorflow as tf

        grad = tf.convert_to_tensor(grad)
    return np.asarray(keras.ops.convert_to_numpy(grad))

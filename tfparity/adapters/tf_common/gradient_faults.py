"""Gradient faults for the catalogue (:mod:`tfparity.testing`), on any Keras layer or
TF side: a gather whose gradient is stopped or scaled, and a layer whose backward pass
is scaled while its forward pass is untouched."""

from __future__ import annotations

from typing import Any

from ..runtime.imports import import_tf


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

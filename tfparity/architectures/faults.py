"""Deliberately broken ports, described per architecture: the pieces each family's fault
catalogue is written with (the catalogues live in the family modules;
:mod:`tfparity.testing` is where users find them).

A parity check that says PASS wrongly is worse than none, so every check should be
seen failing on known faults. Each :class:`Fault` breaks a loaded model the way real
ports break (a dropped bias, a transposed kernel, the tanh GELU, another LayerNorm
epsilon, shifted position embeddings, wrong attention scaling) and says where the
cross-check must localise it. Helpers take variables and layers by duck typing
(``.numpy()``, ``.assign()``), so nothing here imports a framework.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Fault:
    """``apply(model)`` returns the broken :class:`~tfparity.adapters.tf_model.TFModel`
    (the same object for weight faults).

    ``hidden_state``/``layer``/``component`` are the expected ``first_divergence``;
    ``hint`` is a phrase the hint must contain. Layer numbers assume 2 layers.
    """

    name: str
    apply: Callable[[Any], Any]
    hidden_state: int | None
    layer: str | int
    component: str | None
    hint: str


def main_layer(model: Any) -> Any:
    """The main layer of a TFModel's HF model (``model.bert``, ``model.transformer``)."""
    return getattr(model.model, model.model.base_model_prefix)


def in_place(change: Callable[[Any], None]) -> Callable[[Any], Any]:
    """A weight fault: ``change`` gets the model's main layer and edits it."""

    def apply(model: Any) -> Any:
        change(main_layer(model))
        return model

    return apply


def with_config(**changes: Any) -> Callable[[Any], Any]:
    """A config.json fault: the same weights in a model built from a changed config."""

    def apply(model: Any) -> Any:
        from ..adapters.loading import rebuilt_with_config

        return rebuilt_with_config(model, changes)

    return apply


def zero(var: Any) -> None:
    var.assign(np.zeros(var.shape, var.dtype.as_numpy_dtype))


def roll_rows(var: Any) -> None:
    var.assign(np.roll(var.numpy(), 1, axis=0))


def transpose(var: Any) -> None:
    var.assign(var.numpy().T)


def reverse_rows(var: Any) -> None:
    var.assign(var.numpy()[::-1].copy())


def scale(var: Any, factor: float) -> None:
    var.assign(var.numpy() * factor)

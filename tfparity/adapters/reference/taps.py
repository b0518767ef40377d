"""The PyTorch half of sub-layer taps: forward hooks that record the sub-modules'
outputs during a run (the layout and the recorder are :mod:`..interfaces.sides.taps`), and
the parameters as numpy for the weight hints."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..interfaces.taps import Recorder, family_of
from ..runtime.imports import import_torch


@contextlib.contextmanager
def pt_taps(model: Any) -> Iterator[dict[str, np.ndarray]]:
    """Record PyTorch sub-module outputs with forward hooks while the block runs."""
    recorder = Recorder()
    handles = []
    leading: dict[int, tuple[int, ...]] = {}  # [batch, seq] of an ``unflatten`` module

    def remember(module, args, kwargs):
        first = args[0] if args else next(iter(kwargs.values()))
        leading[id(module)] = tuple(first.shape[:2])

    def as_numpy(t, tap):
        value = t.detach().cpu().double().numpy()
        if tap.unflatten is not None:
            value = value.reshape(*leading[id(tap.unflatten)], *value.shape[1:])
        return value

    # the body of a head model (BertForSequenceClassification.bert); a base model: itself
    for name, tap in family_of(model.config).pt_taps(model.base_model).items():

        def hook(_m, inputs, output, name=name, tap=tap):
            value = inputs if tap.side == "in" else output
            recorder.store(name, tap, value, lambda t, tap=tap: as_numpy(t, tap))

        handles.append(tap.layer.register_forward_hook(hook))
        if tap.unflatten is not None:
            pre = tap.unflatten.register_forward_pre_hook(remember, with_kwargs=True)
            handles.append(pre)
    try:
        yield recorder.recorded
    finally:
        for handle in handles:
            handle.remove()


def pt_module_weights(pt_model: Any) -> dict[str, np.ndarray]:
    """PyTorch parameters as numpy, by state-dict name (for weight-level hints)."""
    import_torch()
    return {k: v.detach().cpu().numpy() for k, v in pt_model.state_dict().items()}

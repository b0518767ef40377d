"""The TF half of sub-layer taps and isolated runs on a Hugging Face TF model (the
layout and the recorder are :mod:`..interfaces.taps`, the PyTorch half
:mod:`..reference.taps`).

*Taps* record the sub-layers' outputs during a full run (the sub-layers' ``call`` is
wrapped for the run). *Isolation* feeds each TF sub-layer the PyTorch sub-layer's own
input, so a component's own error is separated from error carried in from below (the
nobuco approach).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...architectures import FeedForward, Tap
from ...compare import to_numpy
from ...inputs import Batch
from ..interfaces.taps import Recorder, family_of
from ..runtime.imports import import_tf


def _tf_main(model: Any) -> Any:
    return getattr(model, model.base_model_prefix)


def feed_forward(tf_model: Any, layer: int) -> FeedForward | None:
    """The TF dense layers and LayerNorm around layer ``layer``'s activation (None where
    the family's layout gives no numeric hints)."""
    return family_of(tf_model.config).feed_forward(_tf_main(tf_model), layer, tf_model.config)


@contextlib.contextmanager
def tf_taps(model: Any) -> Iterator[dict[str, np.ndarray]]:
    """Record TF sub-layer outputs while the block runs; restores ``call`` afterwards."""
    recorder = Recorder()
    taps = family_of(model.config).tf_taps(_tf_main(model))
    originals = {}
    for name, tap in taps.items():
        originals[name] = tap.layer.call
        tap.layer.call = _recording(tap.layer.call, name, tap, recorder)
    try:
        yield recorder.recorded
    finally:
        for name, tap in taps.items():
            tap.layer.call = originals[name]


def _recording(call: Any, name: str, tap: Tap, recorder: Recorder) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out = call(*args, **kwargs)
        value = (args[0] if args else next(iter(kwargs.values()))) if tap.side == "in" else out
        recorder.store(name, tap, value, to_numpy)
        return out

    return wrapper


def isolate(
    tf_model: Any, pt_taps: dict[str, np.ndarray], pt_hidden: list[np.ndarray], batch: Batch
) -> dict[str, np.ndarray]:
    """Run each TF sub-layer on the PyTorch sub-layer's own input.

    ``pt_taps`` and ``pt_hidden`` (the PyTorch ``hidden_states``) come from one PyTorch
    run of ``batch``. Returns TF outputs under the tap names.
    """
    tf = import_tf()
    family, main = family_of(tf_model.config), _tf_main(tf_model)
    # A mixed-precision model's layers compute in float16/bfloat16 and take only inputs
    # of that dtype (Keras casts just the first argument), so everything is fed in it.
    dtype = tf.as_dtype(getattr(tf_model, "compute_dtype", None) or "float32")
    mask = tf.cast(batch.attention_mask, dtype)

    def fed(x: np.ndarray) -> Any:
        return tf.cast(tf.constant(np.asarray(x, np.float32)), dtype)

    out: dict[str, np.ndarray] = {}
    n_layers = sum(1 for k in pt_taps if k.endswith(".attention"))
    for i in range(n_layers):
        block = family.isolate_block(main, i, fed(pt_hidden[i]), mask, lambda k: fed(pt_taps[k]))
        out.update({f"layer_{i}.{c}": to_numpy(v) for c, v in block.items()})
    if getattr(main, "pooler", None) is not None and "pooler" in pt_taps:
        out["pooler"] = to_numpy(main.pooler(fed(pt_hidden[-1])))
    return out

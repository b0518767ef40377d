"""Sub-layer taps and isolated runs, for every architecture whose registry record
describes its sub-layers (:class:`tfparity.architectures.SubLayers`).

Tap names, in the order data flows through a layer: ``embeddings``,
``layer_{i}.attention`` (self-attention + dense + residual + LayerNorm),
``layer_{i}.intermediate`` (FFN up-projection + activation), ``layer_{i}.output``
(FFN down-projection + residual + LayerNorm), ``pooler``.

*Taps* record these outputs during a full run in both frameworks (PyTorch forward
hooks; on the TF side the sub-layers' ``call`` is wrapped for the run). *Isolation*
feeds each TF sub-layer the PyTorch sub-layer's own input, so a component's own error
is separated from error carried in from below (the nobuco approach).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...architectures import COMPONENTS, FeedForward, SubLayers, Tap, for_config
from ...compare import to_numpy
from ...inputs import Batch
from ..interfaces.sides import FeedForwardWeights
from ..runtime.imports import import_tf, import_torch


def family_of(config: Any) -> SubLayers | None:
    """The sub-layer layout of ``config``'s architecture, where it has one."""
    return for_config(config).sublayers_for(config)


def supported(config: Any) -> bool:
    return family_of(config) is not None


def numpy_weights(dense: Any) -> tuple[np.ndarray, np.ndarray]:
    """A TF Dense (``kernel``) or Conv1D (``weight``, GPT's) layer's ``[in, out]`` matrix
    in float64 and its bias as ``[out]``, for numeric hints."""
    kernel = getattr(dense, "kernel", None)
    kernel = dense.weight if kernel is None else kernel
    return kernel.numpy().astype(np.float64), dense.bias.numpy().reshape(-1)


def norm_params(norm: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """A Keras LayerNormalization's gamma, beta and epsilon, for numeric hints."""
    return norm.gamma.numpy(), norm.beta.numpy(), float(norm.epsilon)


def _tf_main(model: Any) -> Any:
    return getattr(model, model.base_model_prefix)


def feed_forward(tf_model: Any, layer: int) -> FeedForward | None:
    """The TF dense layers and LayerNorm around layer ``layer``'s activation (None where
    the family's layout gives no numeric hints)."""
    return family_of(tf_model.config).feed_forward(_tf_main(tf_model), layer, tf_model.config)


def feed_forward_weights(ffn: FeedForward | None) -> FeedForwardWeights | None:
    """``ffn``'s layers read into numpy, for the numeric hints."""
    if ffn is None:
        return None
    norm = None if ffn.norm is None else norm_params(ffn.norm)
    return FeedForwardWeights(numpy_weights(ffn.up), numpy_weights(ffn.down), norm, ffn.activation)


def weight_scope(config: Any, layer: int | str, component: str | None) -> list[tuple[str, str]]:
    """Where a component's PyTorch parameters are, as (name prefix, name part) pairs for
    weight hints. Families name them exactly; for other architectures every parameter
    whose name holds the layer number (``h.3.``, ``block.3.``) or ``embed``/``pooler``."""
    family = family_of(config)
    if family is not None:
        parts = COMPONENTS if component is None else (component,)  # None: the whole layer
        return [(prefix, "") for part in parts for prefix in family.pt_prefixes(layer, part)]
    if isinstance(layer, int):
        return [("", f".{layer}.")]
    return {"embeddings": [("", "embed")], "pooler": [("", "pooler")]}.get(component, [])


# ----------------------------------------------------------------------------- TF


class _Recorder:
    """Where taps write: by tap name, or per call of a shared layer (ALBERT) as
    ``layer_{call}.{name}``."""

    def __init__(self) -> None:
        self.recorded: dict[str, np.ndarray] = {}
        self._calls: dict[str, int] = {}

    def store(self, name: str, tap: Tap, value: Any, as_numpy: Any) -> None:
        if tap.shared:
            call = self._calls.get(name, 0)
            self._calls[name] = call + 1
            name = f"layer_{call}.{name}"
        self.recorded[name] = as_numpy(value[0] if isinstance(value, (tuple, list)) else value)


@contextlib.contextmanager
def tf_taps(model: Any) -> Iterator[dict[str, np.ndarray]]:
    """Record TF sub-layer outputs while the block runs; restores ``call`` afterwards."""
    recorder = _Recorder()
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


def _recording(call: Any, name: str, tap: Tap, recorder: _Recorder) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out = call(*args, **kwargs)
        value = (args[0] if args else next(iter(kwargs.values()))) if tap.side == "in" else out
        recorder.store(name, tap, value, to_numpy)
        return out

    return wrapper


# ----------------------------------------------------------------------------- PT


@contextlib.contextmanager
def pt_taps(model: Any) -> Iterator[dict[str, np.ndarray]]:
    """Record PyTorch sub-module outputs with forward hooks while the block runs."""
    recorder = _Recorder()
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


# ----------------------------------------------------------------------------- isolation


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


def pt_module_weights(pt_model: Any) -> dict[str, np.ndarray]:
    """PyTorch parameters as numpy, by state-dict name (for weight-level hints)."""
    import_torch()
    return {k: v.detach().cpu().numpy() for k, v in pt_model.state_dict().items()}

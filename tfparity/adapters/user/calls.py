"""How a model of the user's own is called, and its mapped layers recorded, in one run.

- a callable gets one dict of numpy int32 arrays (``input_ids``, ``attention_mask``,
  ``token_type_ids`` where the config has token types, ``position_ids`` where the batch
  has them) and returns the last hidden state, or a dict of output names: Hugging
  Face's (``last_hidden_state``, ``pooler_output``, ``logits``, ..., ``hidden_states``)
  or its own (``embedding``), compared where the reference has the same name;
- a functional Keras model gets the inputs it declares, by name (keras-hub's names,
  ``token_ids``, ``padding_mask``, ``segment_ids``, are understood too), a subclassed
  one the whole dict; both with ``training=False``, eagerly.

Each mapped layer's output is recorded while the run lasts, its ``call`` wrapped and
then restored (as the keras-hub taps do).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...compare import to_numpy
from ...errors import TfparityError
from .maps import LayerEntry, unknown

KERAS, TF_KERAS, CALLABLE = "Keras 3 model", "tf-keras model", "callable"
# keras-hub's input names for the batch's tensors, understood beside Hugging Face's.
ALIASES = {
    "token_ids": "input_ids",
    "padding_mask": "attention_mask",
    "segment_ids": "token_type_ids",
}


def keras_kind(obj: Any) -> str | None:
    """Which Keras ``obj`` is a model of (a Keras 3 layer counts), or None. Only a Keras
    already imported is asked: an object of it could not exist otherwise."""
    if "keras" in sys.modules and isinstance(obj, sys.modules["keras"].Layer):
        return KERAS
    if "tf_keras" in sys.modules and isinstance(obj, sys.modules["tf_keras"].Model):
        return TF_KERAS
    return None


@dataclass(frozen=True)
class Callee:
    """A user's model as it is called: the object, its kind, its name for messages."""

    model: Any
    kind: str
    name: str

    def feed(self, available: dict[str, np.ndarray]) -> Any:
        """What the model is called with: the inputs a functional model declares (one
        alone as itself), else the whole dict."""
        declared = self.declared_inputs()
        if declared is None:
            return available
        feed = {}
        for name, dtype in declared:
            ours = ALIASES.get(name, name)
            if ours not in available:
                raise TfparityError(
                    f"{self.name} declares the input {name!r}, which tfparity cannot feed: "
                    f"it feeds {', '.join(available)} (or keras-hub's {', '.join(ALIASES)})."
                )
            feed[name] = available[ours].astype(dtype or np.int32)
        return next(iter(feed.values())) if len(feed) == 1 else feed

    def declared_inputs(self) -> list[tuple[str, Any]] | None:
        """A functional model's inputs (name, dtype); None for a subclassed model or a
        callable, which take the whole dict."""
        if self.kind == KERAS and isinstance(self.model, sys.modules["keras"].Function):
            return [(t.name, t.dtype) for t in self.model.inputs]
        if self.kind == TF_KERAS and self.model.inputs is not None:
            pairs = zip(self.model.input_names, self.model.inputs, strict=True)
            return [(n, t.dtype.as_numpy_dtype) for n, t in pairs]
        return None

    def call(self, feed: Any) -> Any:
        """The model called on ``feed``; a model that cannot take tfparity's inputs is
        bad input (exit 2, naming what it was given), not a crash to report."""
        try:
            return self.model(feed) if self.kind == CALLABLE else self.model(feed, training=False)
        except TfparityError:
            raise
        except Exception as exc:
            given = feed.items() if isinstance(feed, dict) else [("a tensor", feed)]
            shapes = ", ".join(f"{k} {tuple(np.shape(v))}" for k, v in given)
            first = " ".join(str(exc).split())[:200]
            raise TfparityError(
                f"{self.name} could not be called with tfparity's inputs ({shapes}): "
                f"{type(exc).__name__}: {first}"
            ) from exc

    def outputs(self, out: Any, layers: tuple[LayerEntry, ...]) -> dict[str, Any]:
        """The model's return value as named arrays: a tensor is the last hidden state;
        a dict keeps its names (Hugging Face's, or its own, compared where the reference
        has the same) and, for a callable, the layer map's keys (as the hidden states
        they are)."""
        if not isinstance(out, dict):
            if isinstance(out, (list, tuple)):
                raise TfparityError(
                    f"{self.name} returned a {type(out).__name__}; return the last hidden "
                    "state, or a dict of output names ({'last_hidden_state': ..., "
                    "'logits': ...}), so each output is compared with the reference's of "
                    "the same name."
                )
            return {"last_hidden_state": to_numpy(out)}
        mapped = {e.key: e for e in layers} if self.kind == CALLABLE else {}
        missing = [k for k in mapped if k not in out]
        if missing:
            raise TfparityError(
                f"{self.name} returned the outputs {', '.join(map(repr, out))}: layers= maps "
                f"{', '.join(map(repr, missing))}, which it did not return."
            )
        return {
            f"hidden_states[{mapped[key].hidden_state}]" if key in mapped else str(key): value
            for key, value in out.items()
        }

    def layer_objects(self, layers: tuple[LayerEntry, ...]) -> list[tuple[LayerEntry, Any]]:
        """Each mapped Keras layer (a callable's map names outputs: none here); a name
        the model lacks is exit 2, with the closest it has."""
        if self.kind == CALLABLE:
            return []
        found = []
        for entry in layers:
            if not isinstance(entry.key, str):
                found.append((entry, entry.key))
                continue
            try:
                found.append((entry, self.model.get_layer(entry.key)))
            except ValueError:
                names = [layer.name for layer in self.model.layers]
                raise unknown("the layer", entry.key, names, "layers=") from None
        return found

    def variables(self) -> dict[str, Any]:
        """The model's variables by path (Keras 3) or name (tf-keras, without ``:0``)."""
        if self.kind == KERAS:
            return {v.path: v for v in self.model.weights}
        if self.kind == TF_KERAS:
            return {v.name.removesuffix(":0"): v for v in self.model.weights}
        return {}


class LayerRecording:
    """Each mapped layer's outputs, recorded while one run lasts (its ``call`` wrapped,
    then restored); :meth:`hidden_states` holds each to one call."""

    def __init__(self, layers: list[tuple[LayerEntry, Any]]) -> None:
        self.layers = layers
        self.values: list[list[np.ndarray]] = [[] for _ in layers]
        self._restore: list[tuple[Any, Any]] = []

    def __enter__(self) -> LayerRecording:
        for (_entry, layer), values in zip(self.layers, self.values, strict=True):
            self._restore.append((layer, layer.call))
            layer.call = _recorder(layer.call, values)
        return self

    def __exit__(self, *exc: Any) -> None:
        for layer, call in reversed(self._restore):
            layer.call = call
        self._restore.clear()

    def hidden_states(self) -> dict[str, np.ndarray]:
        """``hidden_states[k]`` -> the mapped layer's one output; a layer that did not
        run, or ran more than once (shared), is exit 2."""
        found = {}
        for (entry, _layer), values in zip(self.layers, self.values, strict=True):
            if len(values) != 1:
                times = "did not run" if not values else f"ran {len(values)} times"
                raise TfparityError(
                    f"layers= maps {entry.label!r} to hidden state {entry.hidden_state}, but "
                    f"it {times} in the model's forward pass; map a layer that runs once "
                    "per call."
                )
            found[f"hidden_states[{entry.hidden_state}]"] = values[0]
        return found


def _recorder(call: Any, values: list[np.ndarray]) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out = call(*args, **kwargs)
        values.append(to_numpy(out[0] if isinstance(out, (tuple, list)) else out))
        return out

    return wrapper

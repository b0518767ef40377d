"""keras-hub's converter, recorded: which Keras variable each Hugging Face weight was
ported into (``port_weight`` calls), and how to read a variable back in PyTorch's
layout, for weight hints (:class:`PortMap`) and gradient names."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...results import Hint
from ..interfaces.weight_map import FeedForwardWeights, WeightMap, unmapped


@dataclass(frozen=True)
class Ported:
    """One ``port_weight`` call: the Keras variable, the HF weight key, the hook."""

    variable: Any
    hf_key: str
    hook: Any

    def pt_layout(
        self, pt_value: np.ndarray, value: np.ndarray | None = None
    ) -> tuple[np.ndarray, str | None]:
        """The Keras value (or ``value``, an array of the variable's shape: its
        gradient) in PyTorch's layout (the hook's permutation undone), and the dtype the
        hook casts to where it casts (a lossy conversion), else None. Entries the hook
        drops (RoBERTa's two padding rows of the position table) are PyTorch's."""
        pt_shape = tuple(pt_value.shape)
        # a gradient's dropped entries are zero: PyTorch's rows there get none either
        fill = np.zeros_like(pt_value) if value is not None else pt_value
        value = np.asarray(self.variable.numpy()) if value is None else value
        if self.hook is None:
            if value.size != pt_value.size:
                return value, None  # described as a shape difference
            return value.reshape(pt_shape), None
        probe = self.hook(np.zeros(pt_shape, np.float32), list(value.shape))
        cast = None if np.asarray(probe).dtype == np.float32 else str(np.asarray(probe).dtype)
        index = np.arange(int(np.prod(pt_shape)), dtype=np.float64).reshape(pt_shape)
        if cast is None:
            perm = np.asarray(self.hook(index, list(value.shape))).astype(np.int64).ravel()
            out = np.asarray(fill, value.dtype).ravel().copy()
            out[perm] = value.ravel()
            return out.reshape(pt_shape), None
        if value.shape == tuple(pt_shape):  # a cast only (or a transpose of a square)
            return value, cast
        return value.reshape(pt_shape[::-1]).T, cast  # cast + transpose (Mistral's head)


@contextlib.contextmanager
def recording_ports() -> Iterator[list[Ported]]:
    """Record every ``SafetensorLoader.port_weight`` call made in the body."""
    from keras_hub.src.utils.transformers import safetensor_utils

    loader = safetensor_utils.SafetensorLoader
    original = loader.port_weight
    records: list[Ported] = []

    def port_weight(self: Any, keras_variable: Any, hf_weight_key: str, hook_fn: Any = None):
        records.append(Ported(keras_variable, hf_weight_key, hook_fn))
        return original(self, keras_variable, hf_weight_key, hook_fn)

    loader.port_weight = port_weight
    try:
        yield records
    finally:
        loader.port_weight = original


def pt_name(hf_key: str, pt_weights: dict[str, np.ndarray]) -> str | None:
    """The PyTorch name a converter's HF key stands for in ``pt_weights`` (the keys may
    carry the model prefix, or not), or None."""
    if hf_key in pt_weights:
        return hf_key
    for name in pt_weights:  # the converter's keys may carry the model prefix, or not
        if hf_key.endswith("." + name) or name.endswith("." + hf_key):
            return name
    return None


def pt_gradients(
    ports: list[Ported],
    by_path: dict[str, np.ndarray | None],
    reference: dict[str, np.ndarray],
    word_path: str,
) -> tuple[dict[str, np.ndarray | None], str]:
    """Gradients by Keras variable path (``by_path``) renamed to PyTorch's names in
    PyTorch's layout through the converter's record, and the word-embedding matrix's
    name among them. One function for every keras-hub side (in process on TensorFlow,
    or a worker on another backend, whose paths are the saved backbone's), so both
    name and lay out a gradient alike. A PyTorch weight split over several variables
    (GPT-2's fused ``c_attn`` into query, key and value) gets the sum of their parts:
    each part is laid out with zeros outside its slice."""
    named: dict[str, np.ndarray | None] = {}
    parts: dict[str, set[str]] = {}  # the variables already summed into each name
    word = word_path
    for port in ports:
        name = pt_name(port.hf_key, reference)
        path = port.variable.path
        if name is None or path not in by_path or path in parts.get(name, set()):
            continue
        grad = by_path[path]
        laid = None if grad is None else port.pt_layout(reference[name], grad)[0]
        held = named.get(name)
        named[name] = laid if held is None else (held if laid is None else held + laid)
        parts.setdefault(name, set()).add(path)
        if path == word_path:
            word = name
    return named, word


def rebound(ports: list[Ported], variables: list[Any], same_shape: bool = False) -> list[Ported]:
    """``ports`` re-bound to the variables of the same path among ``variables`` (another
    backbone of the same structure: a reload, or the one a throwaway conversion was
    recorded on); a port with no such variable (or, ``same_shape``, one of another
    shape) is left out."""
    by_path = {v.path: v for v in variables}
    return [
        Ported(by_path[p.variable.path], p.hf_key, p.hook)
        for p in ports
        if p.variable.path in by_path
        and (not same_shape or tuple(p.variable.shape) == tuple(by_path[p.variable.path].shape))
    ]


@dataclass
class PortMap(WeightMap):
    """A keras-hub side's weights through its converter's record: each Keras value
    found by the PyTorch weight a ``port_weight`` call ported into it, in PyTorch's
    layout, and the PyTorch weights never ported named. ``feed_forwards`` reads a
    block's feed-forward weights off the side's backbone (a layout fact, not the
    converter's)."""

    ports: list[Ported]
    feed_forwards: Callable[[int], FeedForwardWeights | None]
    # PyTorch weight name -> the dtype the converter cast it to, as the last
    # weights_for found (a lossy conversion, said beside that weight's hint)
    casts: dict[str, str] = field(default_factory=dict)

    def weights_for(self, pt_weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        self.casts.clear()
        for port in self.ports:
            name = pt_name(port.hf_key, pt_weights)
            if name is None:
                continue
            found[name], cast = port.pt_layout(pt_weights[name])
            if cast is not None:
                self.casts[name] = cast
        return found

    def unported(self, pt_weights: dict[str, np.ndarray], prefix: str, contains: str) -> list[Hint]:
        """PyTorch weights under ``prefix`` (holding ``contains``) that the converter
        never ported: the backbone runs without them (none where nothing was recorded)."""
        if not self.ports:
            return []
        ported = {pt_name(p.hf_key, pt_weights) for p in self.ports}
        text = "weight {} is not ported by keras-hub's converter (the backbone runs without it)"
        return [
            Hint("unported", text.format(name), weight=name)
            for name in unmapped(pt_weights, ported, prefix, contains)
            if np.any(pt_weights[name])
        ]

    def note(self, name: str) -> str | None:
        cast = self.casts.get(name)
        return cast and f"keras-hub's converter casts {name} to {cast} (a lossy dtype conversion)"

    def feed_forward(self, layer: int) -> FeedForwardWeights | None:
        return self.feed_forwards(layer)

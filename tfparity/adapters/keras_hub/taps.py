"""Hidden states and sub-layer taps of a keras-hub backbone, recorded per block call
while one run lasts (and, for isolated runs, PyTorch's values fed in their place)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...architectures import Tap
from ...compare import to_numpy
from ..runtime.imports import import_tf


class BlockRecording:
    """Wraps the backbone's blocks (hidden states, per call) and, with ``taps``, the
    layout's sub-layer taps while one run lasts. ``substitute``: PyTorch's tap values,
    put in place of each tapped value after it is recorded; ``block_inputs``: PyTorch's
    hidden states, fed to each block call instead of TF's."""

    def __init__(self, backbone: Any, layout: Any, taps: bool, substitute: Any, block_inputs: Any):
        self.backbone, self.layout, self.want_taps = backbone, layout, taps
        self.substitute, self.block_inputs = substitute, block_inputs
        self.inputs: list[np.ndarray] = []
        self.outputs: list[np.ndarray] = []
        self.taps: dict[str, np.ndarray] = {}
        self._restore: list[tuple[Any, Any]] = []
        self._call = -1

    def hidden_states(self) -> list[np.ndarray]:
        if not self.inputs:
            return []
        return [self.inputs[0], *self.outputs]

    def __enter__(self) -> BlockRecording:
        bb = self.backbone
        blocks = unique_blocks(bb)
        tap_layers: dict[int, list[tuple[str, Tap]]] = {}
        layout = self.layout
        if self.want_taps and layout is not None:
            for blk in blocks:
                for comp, tap in (layout.block_taps(blk) if layout.block_taps else {}).items():
                    tap_layers.setdefault(id(tap.layer), []).append((comp, tap))
            for name, attr in (("embeddings", layout.embeddings), ("pooler", layout.pooler)):
                if attr:
                    layer = bb.get_layer(attr)
                    tap_layers.setdefault(id(layer), []).append((f"@{name}", Tap(layer)))
        seen: dict[int, Any] = {}
        for blk in blocks:
            seen[id(blk)] = blk
        for layer_id, entries in tap_layers.items():
            if layer_id in seen:
                continue
            layer = entries[0][1].layer
            self._wrap(layer, self._tap_wrapper(layer.call, entries))
        for blk in blocks:
            self._wrap(blk, self._block_wrapper(blk.call, tap_layers.get(id(blk), [])))
        return self

    def __exit__(self, *exc: Any) -> None:
        for layer, call in reversed(self._restore):
            layer.call = call
        self._restore.clear()

    def _wrap(self, layer: Any, wrapper: Any) -> None:
        self._restore.append((layer, layer.call))
        layer.call = wrapper

    def _name(self, comp: str) -> str:
        return comp[1:] if comp.startswith("@") else f"layer_{self._call}.{comp}"

    def _swap(self, name: str, value: Any) -> Any:
        if self.substitute is None or name not in self.substitute:
            return value
        tf = import_tf()
        return tf.cast(tf.constant(np.asarray(self.substitute[name], np.float32)), value.dtype)

    def _tap_wrapper(self, call: Any, entries: list[tuple[str, Tap]]) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            args = list(args)
            for comp, tap in entries:
                if tap.side == "in":
                    name = self._name(comp)
                    self.taps[name] = to_numpy(args[0])
                    args[0] = self._swap(name, args[0])
            out = call(*args, **kwargs)
            for comp, tap in entries:
                if tap.side == "out":
                    name = self._name(comp)
                    self.taps[name] = to_numpy(out)
                    out = self._swap(name, out)
            return out

        return wrapper

    def _block_wrapper(self, call: Any, entries: list[tuple[str, Tap]]) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self._call += 1
            args = list(args)
            if self.block_inputs is not None and self._call < len(self.block_inputs):
                tf = import_tf()
                fed = np.asarray(self.block_inputs[self._call], np.float32)
                args[0] = tf.cast(tf.constant(fed), args[0].dtype)
            self.inputs.append(to_numpy(args[0]))
            out = call(*args, **kwargs)
            value = out[0] if isinstance(out, (tuple, list)) else out
            self.outputs.append(to_numpy(value))
            for comp, _tap in entries:
                self.taps[self._name(comp)] = to_numpy(value)
            return out

        return wrapper


def unique_blocks(backbone: Any) -> list[Any]:
    """The backbone's transformer blocks, each once (a block may be shared)."""
    found, ids = [], set()
    for b in backbone.transformer_layers:
        for blk in b if isinstance(b, (list, tuple)) else [b]:
            if id(blk) not in ids:
                ids.add(id(blk))
                found.append(blk)
    return found

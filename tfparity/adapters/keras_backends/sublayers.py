"""Sub-layer taps inside the layers of a functional graph, for the backend worker.

The worker records every layer of a functional model as an output of a second model
built on the same graph, but a layer's own sublayers (a keras-hub
``transformer_layer_k``'s attention, its dense and norm layers) are called inside its
``call`` and are not in that graph: a fault there would be named only as the block.
While one forward pass lasts, each sublayer's ``call`` is wrapped (then restored) to
keep its output, by its Keras path (``transformer_layer_1/self_attention/query``).
Plain Python wrapping works alike on TensorFlow, JAX and torch, which all run a model
called directly eagerly; a layer called more than once in the pass is named per call
(``path``, ``path#1``, ...). Outputs are kept in the order the calls return, so a
sublayer comes before the sublayers and the block that use it.

Like the worker, this module imports no framework: Keras is handed in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Tap:
    """One sublayer output of one call: its name, the graph layer that holds it."""

    name: str
    parent: str
    value: np.ndarray


def has_graph(model: Any) -> bool:
    """Whether ``model`` is a graph of layers (functional or Sequential), not a
    subclassed ``keras.Model`` whose ``call`` is Python (its sublayers are then tapped
    from the model itself, named by their path from it)."""
    return bool(getattr(model, "inputs", None))  # a subclassed model has no attribute


def nested_layers(layer: Any) -> list[tuple[str, Any]]:
    """Every layer inside ``layer`` (depth first) with its path from ``layer``'s name;
    a sublayer reachable twice is listed once, at its first path."""
    found: list[tuple[str, Any]] = []
    seen: set[int] = {id(layer)}

    def visit(path: str, outer: Any) -> None:
        for inner in outer._flatten_layers(include_self=False, recursive=False):
            if id(inner) in seen or type(inner).__name__ == "InputLayer":
                continue
            seen.add(id(inner))
            found.append((f"{path}/{_stable_name(outer, inner)}", inner))
            visit(found[-1][0], inner)

    visit(layer.name, layer)
    return found


def _stable_name(outer: Any, inner: Any) -> str:
    """``inner``'s name, unless Keras made it up (``softmax_3``: the class's name and a
    counter of the layers built so far in this process, so the float64 twin's and
    another process's differ): then the attribute of ``outer`` that holds it
    (``_softmax`` -> ``softmax``, ``blocks[1]``), or the class's name and the
    sublayer's position."""
    base = _snake_case(type(inner).__name__)
    name = str(inner.name)
    if name != base and not re.fullmatch(rf"{re.escape(base)}_\d+", name):
        return name
    held = {**vars(outer), **(getattr(outer, "_modules", None) or {})}  # torch: _modules
    held.pop("_layers", None)  # Keras's own list of every sublayer: no name of the user's
    for attribute, value in held.items():
        if value is inner:
            return attribute.lstrip("_") or attribute
    for attribute, value in held.items():
        if isinstance(value, (list, tuple)) and any(v is inner for v in value):
            index = next(i for i, v in enumerate(value) if v is inner)
            return f"{attribute.lstrip('_') or attribute}[{index}]"
    siblings = outer._flatten_layers(include_self=False, recursive=False)
    return f"{base}[{next(i for i, v in enumerate(siblings) if v is inner)}]"


def _snake_case(name: str) -> str:
    """Keras's auto-name of a class (``MultiHeadAttention`` -> ``multi_head_attention``)."""
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


@dataclass
class SublayerTaps:
    """A context manager: inside it, every sublayer of ``layers`` (the graph's) records
    its output to :attr:`taps` each time it runs, converted to numpy at once (so the
    backend's tensor is not kept)."""

    keras: Any
    layers: list[Any]
    taps: list[Tap] = field(default_factory=list)
    _calls: dict[str, int] = field(default_factory=dict)
    _restore: list[tuple[Any, str, Any]] = field(default_factory=list)
    _active: list[str] = field(default_factory=list)  # the graph layers whose call runs

    def __enter__(self) -> SublayerTaps:
        for top in self.layers:
            self._wrap(top, lambda call, name=top.name: self._within(call, name))
            for path, inner in nested_layers(top):
                self._wrap(inner, lambda call, p=path, t=top.name: self._wrapped(call, p, t))
        return self

    def _wrap(self, layer: Any, wrapping: Any) -> None:
        """Replace ``layer``'s call by ``wrapping(call)`` until :meth:`__exit__`."""
        # Keras's __call__ runs quantized_call instead of call on a quantised layer
        quantised = getattr(layer, "quantization_mode", None) is not None
        attribute = "quantized_call" if quantised else "call"
        original = getattr(layer, attribute)
        own = attribute in vars(layer)  # else the class's method: deleted after
        self._restore.append((layer, attribute, original if own else None))
        setattr(layer, attribute, wrapping(original))

    def _within(self, call: Any, name: str) -> Any:
        """A graph layer's call, marked as running: a sublayer's call is kept only
        inside its graph layer's (a keras-hub ``CausalLM`` calls the backbone's
        ``token_embedding`` again, outside the backbone, for its logits: that call is
        the graph layer's own output, not a tap of the backbone)."""

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self._active.append(name)
            try:
                return call(*args, **kwargs)
            finally:
                self._active.pop()

        return wrapper

    def __exit__(self, *exc: Any) -> None:
        for inner, attribute, original in reversed(self._restore):
            if original is None:
                delattr(inner, attribute)
            else:
                setattr(inner, attribute, original)
        self._restore.clear()

    def _wrapped(self, call: Any, path: str, parent: str) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            out = call(*args, **kwargs)
            if parent in self._active:
                self._keep(path, parent, out)
            return out

        return wrapper

    def _keep(self, path: str, parent: str, out: Any) -> None:
        """The tensors of one call's output, named ``path`` (``path/k`` for several)."""
        k = self._calls.get(path, 0)
        self._calls[path] = k + 1
        name = path if k == 0 else f"{path}#{k}"
        flat = [t for t in self.keras.tree.flatten(out) if hasattr(t, "shape")]
        for i, tensor in enumerate(flat):
            value = to_numpy(self.keras, tensor)
            self.taps.append(Tap(name if len(flat) == 1 else f"{name}/{i}", parent, value))


def to_numpy(keras: Any, tensor: Any) -> np.ndarray:
    """``tensor`` as a numpy array the parent can read: a ``bfloat16`` one (a
    ``mixed_bfloat16`` layer's output; numpy has no such dtype, and ``np.savez`` would
    write it as raw bytes) widened to float32, which holds every bfloat16 value
    exactly."""
    value = np.asarray(keras.ops.convert_to_numpy(tensor))
    return value.astype(np.float32) if value.dtype.name == "bfloat16" else value


def merged(
    recorded: dict[str, np.ndarray], owners: dict[str, str], taps: list[Tap]
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The graph layers' outputs (``recorded``, in graph order, each name's layer in
    ``owners``) with each layer's taps just before its first output, as they ran; and
    each tap's parent layer. A tap's name is never a graph layer's (both are Keras
    names, unique in a model, and a tap's has its parent's before a ``/``)."""
    by_parent: dict[str, list[Tap]] = {}
    for tap in taps:
        by_parent.setdefault(tap.parent, []).append(tap)
    out: dict[str, np.ndarray] = {}
    for name, value in recorded.items():
        for tap in by_parent.pop(owners.get(name, name), []):
            out[tap.name] = tap.value
        out[name] = value
    return out, {t.name: t.parent for t in taps if t.name in out}

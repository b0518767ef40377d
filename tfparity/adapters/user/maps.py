"""The two maps a user gives with a model of their own (``tfparity.user_model``).

``layers=``: which of the model's layers (a Keras layer name, the layer itself, or, for
a plain callable, a key of the dict it returns) gives Hugging Face's
``hidden_states[k]``. With it the cross-check compares every mapped hidden state and
localises a divergence to the first layer that parts; without it only the outputs are
compared.

``weights=``: which Keras variable (by its path, ``block_1/ffn_up/kernel``) holds which
Hugging Face PyTorch weight (``encoder.layer.1.intermediate.dense.weight``), with the
transform that takes the Keras value to PyTorch's layout (``"transpose"`` for a Dense
kernel, or a function). With it the hints name the weight that differs.

No framework here: the entries are plain data, checked against the model and the
reference by :mod:`tfparity.adapters.user.side`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import TfparityError
from ...results import Hint
from ..interfaces.weight_map import WeightMap, unmapped

TRANSPOSE = "transpose"


@dataclass(frozen=True)
class LayerEntry:
    """One ``layers=`` entry: a layer (its name, or the layer object) -> ``hidden_states[k]``."""

    key: Any
    hidden_state: int

    @property
    def label(self) -> str:
        """How messages name it: the name given, or the layer object's own name."""
        return self.key if isinstance(self.key, str) else f"{type(self.key).__name__} layer"


@dataclass(frozen=True)
class WeightEntry:
    """One ``weights=`` entry: a Keras variable path -> a PyTorch weight name, and the
    transform taking the Keras value to PyTorch's layout (None: the same values, reshaped
    where the sizes agree)."""

    path: str
    pt_name: str
    transform: Callable[[np.ndarray], np.ndarray] | None = None

    def pt_layout(self, value: np.ndarray, pt_shape: tuple[int, ...]) -> np.ndarray:
        if self.transform is not None:
            return np.asarray(self.transform(value))
        if value.shape != pt_shape and value.size == int(np.prod(pt_shape)):
            return value.reshape(pt_shape)  # a [n] bias kept as [1, n]; shapes otherwise differ
        return value


def layer_entries(layers: Mapping[Any, int] | None) -> tuple[LayerEntry, ...]:
    """``layers=`` as entries, in hidden-state order; refused (exit 2) when an index is
    not a non-negative int or two layers claim one hidden state."""
    if layers is None:
        return ()
    if not isinstance(layers, Mapping):
        raise TypeError(
            "layers must be a dict of layer name -> hidden state index, not "
            f"{type(layers).__name__}."
        )
    entries = []
    for key, index in layers.items():
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < 0:
            raise TfparityError(
                f"layers= maps {key!r} to {index!r}; give the Hugging Face hidden state "
                "index it produces (an int: 0 is the embeddings' output, k the output of "
                "layer k-1)."
            )
        if not isinstance(key, str) and not callable(key):
            raise TfparityError(
                f"layers= has the key {key!r}: give a layer name (str) or the layer itself."
            )
        entries.append(LayerEntry(key, int(index)))
    seen: dict[int, LayerEntry] = {}
    for entry in entries:
        if entry.hidden_state in seen:
            raise TfparityError(
                f"layers= maps both {seen[entry.hidden_state].label!r} and {entry.label!r} "
                f"to hidden state {entry.hidden_state}; each hidden state comes from one layer."
            )
        seen[entry.hidden_state] = entry
    return tuple(sorted(entries, key=lambda e: e.hidden_state))


def check_range(entries: tuple[LayerEntry, ...], layer_count: int | None, reference: str) -> None:
    """Refuse a hidden state the reference does not have (exit 2, naming its range)."""
    if layer_count is None:
        return
    for entry in entries:
        if entry.hidden_state > layer_count:
            raise TfparityError(
                f"layers= maps {entry.label!r} to hidden state {entry.hidden_state}, but the "
                f"reference {reference} has {layer_count} layers: hidden states 0 (the "
                f"embeddings' output) to {layer_count} (the last layer's)."
            )


def weight_entries(weights: Mapping[str, Any] | None) -> tuple[WeightEntry, ...]:
    """``weights=`` as entries. A value is a PyTorch name, or ``(name, transform)`` with
    ``transform`` ``"transpose"`` or a function of the Keras value (numpy)."""
    if weights is None:
        return ()
    if not isinstance(weights, Mapping):
        raise TypeError(
            "weights must be a dict of Keras variable path -> PyTorch weight name, not "
            f"{type(weights).__name__}."
        )
    return tuple(_weight_entry(path, value) for path, value in weights.items())


def _weight_entry(path: Any, value: Any) -> WeightEntry:
    if not isinstance(path, str):
        raise TfparityError(f"weights= has the key {path!r}: give the Keras variable's path.")
    if isinstance(value, str):
        return WeightEntry(path, value)
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        name, transform = value
        if transform == TRANSPOSE:
            return WeightEntry(path, name, np.transpose)
        if callable(transform):
            return WeightEntry(path, name, transform)
    raise TfparityError(
        f"weights= maps {path!r} to {value!r}; give the PyTorch weight name, or (name, "
        f"'{TRANSPOSE}') for a kernel PyTorch stores transposed, or (name, function) "
        "taking the Keras value to PyTorch's layout."
    )


def unknown(what: str, name: str, known: list[str], given: str) -> TfparityError:
    """An exit-2 error for a name the map gives that the model or reference lacks, with
    the closest names it does have."""
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.4) or known[:5]
    listed = ", ".join(repr(k) for k in close)
    return TfparityError(
        f"{given} names {what} {name!r}, which does not exist; did you mean: {listed}?"
    )


def pt_name_in(name: str, pt_weights: Mapping[str, Any]) -> str | None:
    """``name`` as the reference holds it: itself, or the one name that adds or drops
    the model prefix (``bert.``) around it."""
    if name in pt_weights:
        return name
    found = [n for n in pt_weights if n.endswith("." + name) or name.endswith("." + n)]
    return found[0] if len(found) == 1 else None


@dataclass(frozen=True)
class EntryMap(WeightMap):
    """A model of one's own's weights by the entries naming them: ``weights=``'s
    (``given``), else those of the Hugging Face TF model it wraps."""

    entries: tuple[WeightEntry, ...]
    given: bool  # weights=: a PyTorch name the reference lacks is a typo (exit 2)
    variables: Callable[[], dict[str, Any]]  # the model's variables by path, when asked

    def weights_for(self, pt_weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The mapped variables' values in PyTorch's layout, by PyTorch name. A wrapped
        model's weight the reference lacks (a pooler a classifier checkpoint drops) is
        left out; a ``weights=`` name it lacks is exit 2 (a typo)."""
        variables = self.variables()
        found = {}
        for entry in self.entries:
            name = pt_name_in(entry.pt_name, pt_weights)
            if name is None and not self.given:
                continue
            if name is None:
                raise unknown("the PyTorch weight", entry.pt_name, list(pt_weights), "weights=")
            value = np.asarray(variables[entry.path].numpy())
            found[name] = entry.pt_layout(value, tuple(pt_weights[name].shape))
        return found

    def note(self, name: str) -> str | None:
        """The variable of this model that ``weights=`` maps onto ``name``."""
        for entry in self.entries:
            if pt_name_in(entry.pt_name, {name: None}):  # the name, or one prefix apart
                return f"in your model: {entry.path}"
        return None

    def unported(self, pt_weights: dict[str, np.ndarray], prefix: str, contains: str) -> list[Hint]:
        """The reference's weights here that ``weights=`` leaves out (not compared)."""
        if not self.entries:
            return []
        mapped = {pt_name_in(e.pt_name, pt_weights) for e in self.entries}
        left = unmapped(pt_weights, mapped, prefix, contains)
        if not left:
            return []
        shown = ", ".join(left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
        if self.given:
            return [Hint("unported", f"weights= does not map {shown} (not compared)")]
        return [
            Hint(
                "unported",
                f"no variable of the wrapped Hugging Face model holds {shown} (not compared)",
            )
        ]

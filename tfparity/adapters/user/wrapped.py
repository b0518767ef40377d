"""Weight names for a model of the user's own that wraps a Hugging Face TF model.

A tf-keras model (subclassed or functional) that holds a ``TFBertModel`` and adds a head
of its own has no ``weights=`` map, yet the wrapped model's variables carry
transformers' own paths (``tf_bert_model/bert/encoder/layer_._1/...``). transformers'
name conversion (:func:`~..hf_tf.weight_names.pt_name_of`) turns each into the PyTorch name it
loads from, so weight hints name ``encoder.layer.1.intermediate.dense.weight`` without a
map; the user's own variables (the head's) stay unnamed, and the notes say which.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..hf_tf.weight_names import pt_name_of
from ..runtime.imports import import_transformers
from .calls import TF_KERAS
from .maps import WeightEntry


@dataclass(frozen=True)
class WrappedNames:
    """The weight map derived from the HF TF models a user's model wraps."""

    entries: tuple[WeightEntry, ...]
    models: tuple[str, ...]  # how the notes name each wrapped model: "TFBertModel 'tf_bert_model'"
    unnamed: tuple[str, ...]  # the variables no wrapped model holds (the user's own)
    counted: int  # the model's variables when derived (a first run may build more)

    def note(self) -> str:
        """What the derived map names, and what it leaves unnamed."""
        said = (
            f"No weights map was given (weights=): the {len(self.entries)} variables of the "
            f"Hugging Face TF model it wraps ({', '.join(self.models)}) are named by "
            "transformers' variable paths, so weight hints name their PyTorch weights"
        )
        if not self.unnamed:
            return said + "."
        shown = ", ".join(self.unnamed[:4])
        more = f" and {len(self.unnamed) - 4} more" if len(self.unnamed) > 4 else ""
        return (
            f"{said}; your own variables ({shown}{more}) have no PyTorch name, so hints do "
            "not name them (weights= maps them)."
        )


def wrapped_names(model: Any, kind: str) -> WrappedNames | None:
    """The derived map for ``model`` (a user's tf-keras model), or None where it wraps
    no HF TF model or has no variables yet (unbuilt)."""
    if kind != TF_KERAS or not model.weights:
        return None
    wrapped = _hf_models(model)
    if not wrapped:
        return None
    entries, claimed = [], set()
    for hf in wrapped:
        for var in hf.weights:
            if id(var) in claimed:
                continue
            claimed.add(id(var))
            entries.append(_entry(var, hf))
    unnamed = tuple(_path(v) for v in model.weights if id(v) not in claimed)
    models = tuple(f"{type(hf).__name__} '{hf.name}'" for hf in wrapped)
    return WrappedNames(tuple(entries), models, unnamed, len(model.weights))


def _hf_models(model: Any) -> list[Any]:
    """The HF TF models inside ``model`` (itself excluded: an HF model is not a user's)."""
    base = import_transformers().TFPreTrainedModel
    found, seen = [], set()
    for module in model.submodules:
        if isinstance(module, base) and id(module) not in seen:
            seen.add(id(module))
            found.append(module)
    return found


def _entry(var: Any, hf: Any) -> WeightEntry:
    """``var`` by its path in the user's model, named as ``hf`` names it: the path from
    the wrapped model's own scope on (an outer scope the wrapper adds is cut)."""
    path = _path(var)
    parts = path.split("/")
    own = "/".join(parts[parts.index(hf.name) :]) if hf.name in parts else path
    name, transposed = pt_name_of(own, var.shape, hf.base_model_prefix, with_base_prefix=True)
    return WeightEntry(path, name, np.transpose if transposed else None)


def _path(var: Any) -> str:
    """A tf-keras variable's path as :meth:`~.calls.Callee.variables` keys it."""
    return var.name.removesuffix(":0")

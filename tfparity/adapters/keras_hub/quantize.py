"""Keras-native quantisation (``model.quantize``): the ONE place tfparity quantises.

``crosscheck --quantize int8|int4|float8`` checks a keras-hub model (a ``keras-hub:``
spec or a Keras 3 ``.keras`` file) as it would ship quantised: a copy of its float
model is quantised here, so the float model stays what the referee judges and the
quantised copy is judged against it (docs/quantised.md). :func:`quantize` takes the
layers to quantise too (by variable path prefix, ``transformer_layer_3``), so a
one-layer-at-a-time attribution can reuse it. A ``.keras`` file saved after
``quantize`` carries its mode in its layers' dtype policies (``int8_from_float32``):
:func:`stored_mode` reads it back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from ...architectures.heads import Head
from ...errors import TfparityError
from ..interfaces.sides import TFSide

MODES = ("int8", "int4", "float8")


def check_mode(mode: str) -> str:
    """``mode`` if Keras quantises to it here; exit 2 otherwise (before any load)."""
    if mode not in MODES:
        raise TfparityError(
            f"Unknown quantisation mode {mode!r}: --quantize takes one of {', '.join(MODES)} "
            "(Keras 3's model.quantize modes; gptq needs calibration data and is not offered)."
        )
    return mode


def quantize(model: Any, mode: str, layers: Sequence[str] | None = None) -> None:
    """Quantise the Keras model ``model`` in place to ``mode``; with ``layers``, only the
    sub-layers whose path starts with one of them (``"transformer_layer_0"``)."""
    check_mode(mode)
    if layers is None:
        model.quantize(mode)
        return
    prefixes = tuple(layers)
    model.quantize(mode, filters=lambda layer: str(layer.path).startswith(prefixes))


def stored_mode(model: Any) -> str | None:
    """The mode ``model``'s layers were quantised to, from their dtype policies
    (``int8_from_float32``: ``int8``); None for a float model."""
    flatten = getattr(model, "_flatten_layers", None)
    if flatten is None:  # not a Keras 3 model
        return None
    # each quantised layer's own mode (its dtype policy, or its entry in the
    # DTypePolicyMap a reloaded model's layers share)
    found = {str(m) for layer in flatten() if (m := getattr(layer, "quantization_mode", None))}
    return "+".join(sorted(found)) or None


def quantised_side(side: TFSide, mode: str) -> TFSide:
    """A copy of the keras-hub side ``side`` with its model quantised to ``mode``;
    ``side`` itself is untouched. Exit 2 for a side Keras cannot quantise here (tf-keras
    HF classes, exports, a model of your own) or one already quantised."""
    from .side import KerasHubModel
    from .task import causal_lm_side

    check_mode(mode)
    if not isinstance(side, KerasHubModel):
        raise TfparityError(
            f"--quantize {mode} quantises a Keras 3 keras-hub model (a keras-hub:<SPEC> or a "
            f".keras file holding a keras-hub backbone or causal LM); {side.name} is "
            f"{side.side_kind}, which Keras's model.quantize does not reach. Check a "
            "keras-hub port of it (keras-hub:<SPEC>), or a LiteRT quantised export."
        )
    stored = stored_mode(side.model)
    if stored is not None:
        raise TfparityError(
            f"{side.name} is already quantised ({stored}); it is checked as it is, so drop "
            f"--quantize (quantising it again to {mode} would judge a model nobody ships)."
        )
    base = KerasHubModel(**{f.name: getattr(side, f.name) for f in fields(KerasHubModel) if f.init})
    base.backbone = _copy(side.backbone)
    base.ports, base.name = [], f"{side.name} quantised {mode}"
    base.notes = [n for n in side.notes]
    copy = causal_lm_side(base) if side.head is Head.CAUSAL_LM else base
    quantize(copy.model, mode)
    return copy


def _copy(backbone: Any) -> Any:
    """A new backbone of the same config holding copies of ``backbone``'s weights."""
    twin = type(backbone).from_config(backbone.get_config())
    twin.set_weights(backbone.get_weights())
    return twin

"""The float model a Keras-quantised model of one's own was quantised from
(``--source FLOAT.keras``, or ``source=`` the float Keras model in Python), as a side:
the exact check quantises it afresh (:mod:`~tfparity.adapters.keras_hub.requantise`).

A model of one's own is no export of a checkpoint, so ``--source`` is not its
companion (its config and tokenizer come from ``--pt``): it is the float twin, bound to
the same reference with the quantised model's own maps (``layers=``, ``weights=``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...errors import TfparityError
from ..interfaces.sides import TFSide
from ..sources.specs import ModelSpec, as_spec
from ..tf_common.quantize import stored_mode
from .side import UserModel, user_model


def quantised_own(tf_model: TFSide) -> bool:
    """Whether ``tf_model`` is a model of one's own that Keras quantised."""
    return isinstance(tf_model, UserModel) and stored_mode(tf_model.model) is not None


def keras_source(source: Any, tf_model: TFSide, pt: Any) -> TFSide | None:
    """``source`` as the float twin of ``tf_model``, a Keras-quantised model of one's
    own: a Keras model object, or a ``.keras`` file (loaded with ``pt``'s config); None
    where ``tf_model`` is not one (the usual ``--source`` rules apply). Exit 2 for a
    source that is neither, or is quantised itself."""
    if source is None or not quantised_own(tf_model):
        return None
    if isinstance(source, (str, ModelSpec)):
        spec = as_spec(source)
        if spec.kind != "keras-file":
            raise TfparityError(
                f"--source {spec.text}: {tf_model.name} is a quantised model of your own, "
                "so its source is the float model it was quantised from, a .keras file "
                "(source= the model itself in Python)."
            )
        held, name = _load(spec), spec.text
    else:
        held, name = source, f"{type(source).__name__} (the float source, in memory)"
    if stored_mode(held) is not None:
        raise TfparityError(
            f"The source {name} is quantised itself ({stored_mode(held)}): give the float "
            f"model {tf_model.name} was quantised from."
        )
    side = user_model(held, name=name).bound(pt)
    return replace(side, layers=tf_model.layers, mapped_weights=tf_model.mapped_weights, spec=None)


def _load(spec: ModelSpec) -> Any:
    import keras

    from ..exported.keras_file import CUSTOM_LAYERS

    try:
        return keras.saving.load_model(spec.location, compile=False)
    except Exception as exc:
        said = " ".join(str(exc).split())
        raise TfparityError(
            f"Keras could not load {spec.text}: {said[:300]}{CUSTOM_LAYERS}"
        ) from exc

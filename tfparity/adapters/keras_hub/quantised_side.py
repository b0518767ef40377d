"""A keras-hub side's quantised copy, for ``crosscheck --quantize``: the float model
stays what the referee judges, the copy is quantised by :func:`.quantize.quantize`
(the one place tfparity quantises)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from ...architectures.heads import Head
from ...errors import TfparityError
from ..interfaces.sides import TFSide
from .quantize import check_mode, quantize, stored_mode
from .side import KerasHubModel
from .task import causal_lm_side


def quantised_side(side: TFSide, mode: str) -> TFSide:
    """A copy of the keras-hub side ``side`` with its model quantised to ``mode``;
    ``side`` itself is untouched. Exit 2 for a side Keras cannot quantise here (tf-keras
    HF classes, exports, a model of your own) or one already quantised."""
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

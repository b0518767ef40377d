"""A keras-hub side's quantised copy, for ``crosscheck --quantize``: the float model
stays what the referee judges, the copy is quantised by
:func:`..tf_common.quantize.quantize` (the one place tfparity quantises)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from ...architectures.heads import Head
from ...architectures.keras_hub_layouts import block
from ...errors import TfparityError
from ..interfaces.sides import TFSide
from ..tf_common.quantize import check_mode, modes_of_parts, quantize, stored_mode
from .heads import KerasHubHeadTask, head_task_side
from .side import KerasHubModel
from .task import causal_lm_side


def quantised_side(
    side: TFSide, mode: str, layers: Sequence[str] | None = None, config: Any = None
) -> TFSide:
    """A copy of the keras-hub side ``side`` with its model quantised to ``mode`` (only
    the ``layers``, by path, where given: ``--attribute``'s one layer at a time);
    ``side`` itself is untouched. Exit 2 for a side Keras cannot quantise here (tf-keras
    HF classes, exports, a model of your own) or one already quantised. ``config``: a
    Keras GPTQ/AWQ config, for a mode that takes calibration data (:func:`.quantize.quantize`)."""
    if config is None:
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
    task = _copy(side.task) if isinstance(side, KerasHubHeadTask) else None
    base.backbone = _copy(side.backbone) if task is None else task.backbone
    only = "" if layers is None else f" ({', '.join(layers)} only)"
    base.ports, base.name = [], f"{side.name} quantised {mode}{only}"
    base.notes = [n for n in side.notes]
    if task is not None:  # a task with a head of its own: the head is quantised too
        copy = head_task_side(base, task, side.mapped)
        copy.ports = []
    else:
        copy = causal_lm_side(base) if side.head is Head.CAUSAL_LM else base
    quantize(copy.model, mode, layers, config)
    return copy


def one_at_a_time(side: TFSide, mode: str) -> tuple[list[tuple[int | str, str]], Any]:
    """``--attribute``'s parts of ``side`` (:func:`quantisable_parts`) and the maker of a
    fresh copy with one of them quantised (by path): one copy alive at a time."""
    parts = quantisable_parts(side)
    return parts, lambda path: quantised_side(side, mode, [path])


def quantisable_parts(side: TFSide) -> list[tuple[int | str, str]]:
    """What ``--attribute`` quantises one at a time: ``("embeddings", path)`` for the
    token embedding (with a keras-hub causal LM's head: the same layer, reversed) and
    ``(i, path)`` for each transformer block, by the layer paths
    :func:`..tf_common.quantize.quantize` takes. Exit 2 where ``side`` cannot be
    quantised."""
    if not isinstance(side, KerasHubModel):
        quantised_side(side, "int8")  # its refusal, in its words
    backbone = side.backbone
    parts: list[tuple[int | str, str]] = [("embeddings", str(side._lookup().path))]
    count = int(getattr(backbone, "num_layers", 0) or 0)
    for i in range(count):
        path = str(block(backbone, i).path)
        if path not in {p for _, p in parts}:  # ALBERT's shared blocks: once
            parts.append((i, path))
    return parts


def part_modes(side: TFSide) -> dict[int | str, str]:
    """The Keras mode of each of ``side``'s parts (:func:`quantisable_parts`) that is
    quantised: ``{"embeddings": "int8", 0: "int4", 1: "int8"}`` for a mixed-mode file."""
    return modes_of_parts(side.model, quantisable_parts(side))


def _copy(backbone: Any) -> Any:
    """A new backbone (or task) of the same config holding copies of its weights."""
    twin = type(backbone).from_config(backbone.get_config())
    twin.set_weights(backbone.get_weights())
    return twin


def quantised_twin(side: TFSide, mode: str | None, attribute: bool) -> tuple[Any, tuple]:
    """The Keras-quantised copy of ``side`` (exit 2 where it cannot be), or None; with
    ``attribute``, its parts and the maker of a copy with one of them quantised
    (``--quantize MODE --attribute``)."""
    if mode is None:
        return None, ((), None)
    return quantised_side(side, mode), one_at_a_time(side, mode) if attribute else ()

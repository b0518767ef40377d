"""The pieces an embedding layer adds up, as numpy arrays, per architecture.

Checks that ask "what is this tensor?" (diagnose) or "are positions honoured?"
(positions) need to know what the model's embedding layer computes from ids: which
word matrix, which position and token-type tables, which LayerNorm, and which
position ids the model uses when none are given. Where those live is an architecture
fact (:class:`tfparity.architectures.EmbeddingTables`); this module reads them off a
model; the arithmetic on the arrays stays in the checks. ``model`` is a
:class:`~.tf_model.TFModel`, which offers these as its methods (typed ``Any`` here: that
module imports this one).
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from ...architectures import Positions
from ..interfaces.embeddings import EmbeddingParts, LayerNormParams, PositionFacts
from ..runtime.imports import import_tf


def embedding_parts(model: Any) -> EmbeddingParts:
    """Numpy copies of ``model``'s embedding tables (read, never modified)."""
    arch = model.architecture
    tables = arch.embeddings
    layer = model.embedding_layer()
    word_var = model.word_embeddings()
    word_attr = "weight" if getattr(layer, "weight", None) is word_var else "embeddings"
    owners = (layer, _main_layer(model))
    ids_only = model.ids_only_change
    gather = f"tf.gather(model.get_input_embeddings().{word_attr}, input_ids)"
    return EmbeddingParts(
        word=np.asarray(word_var.numpy()),
        position=_first_table(owners, tables.position),
        token_type=_first_table(owners, tables.token_type),
        layer_norm=_layer_norm(getattr(layer, tables.layer_norm, None))
        if tables.layer_norm
        else None,
        gather_code=gather + (f"; {ids_only.code}" if ids_only else ""),
    )


def default_position_ids(model: Any, input_ids: np.ndarray) -> np.ndarray:
    """The rows of the position table the model uses when no position_ids are passed.

    BERT-like models count 0..seq-1; RoBERTa-like models count from padding_idx + 1 and
    give padding the padding index (computed from input_ids, as HF TF does).
    """
    ids = np.asarray(input_ids)
    if model.padding_aware_positions:
        pad = int(getattr(model.embedding_layer(), "padding_idx", 1))
        real = (ids != pad).astype(np.int64)
        return (np.cumsum(real, axis=1) * real + pad).astype(np.int32)
    return np.broadcast_to(np.arange(ids.shape[1], dtype=np.int32), ids.shape).copy()


def position_facts(model: Any) -> PositionFacts:
    """Whether positions are a table (absolute) and whether ``position_ids`` reach it."""
    accepted = inspect.signature(model.model.call).parameters
    arch = model.architecture
    kind = {
        Positions.ROTARY: "rotary",
        Positions.RELATIVE: "relative",
        Positions.NONE: "relative",
    }.get(arch.positions, "absolute")
    if arch.positions is Positions.UNKNOWN and embedding_parts(model).position is None:
        kind = "relative"  # the generic family: no table found, so inside attention
    causal = arch.causal or bool(getattr(model.config, "is_decoder", False))
    local = arch.local_window
    if local is not None and local.when and not getattr(model.config, local.when, False):
        local = None  # turned off in this config (MobileBERT without its trigram input)
    window = local.tokens if local else None
    if local is not None and local.attribute:
        window = getattr(model.config, local.attribute)
    if isinstance(window, list | tuple):  # one per layer: the narrowest decides
        window = min(window)
    return PositionFacts(
        kind=kind,
        takes_position_ids="position_ids" in accepted,
        causal=causal,
        window=None if window is None else int(window),
        window_kind=local.what if local else None,
    )


def _main_layer(model: Any) -> Any:
    prefix = getattr(model.model, "base_model_prefix", "")
    return getattr(model.model, prefix, model.model)


def _first_table(owners: tuple[Any, ...], attr: str | None) -> np.ndarray | None:
    """The table ``attr`` on the embedding layer, else on the main layer (GPT-2's wpe)."""
    if attr is None:
        return None
    return next((t for o in owners if (t := _table(o, attr)) is not None), None)


def _table(owner: Any, attr: str) -> np.ndarray | None:
    """A 2-D table held as a variable, or by a layer as ``.weight``/``.embeddings``."""
    tf = import_tf()
    value = getattr(owner, attr, None)
    if value is None:
        return None
    for inner in ("weight", "embeddings"):
        if not isinstance(value, tf.Variable):
            value = getattr(value, inner, value)
    if isinstance(value, tf.Variable) and len(value.shape) == 2:
        return np.asarray(value.numpy())
    return None


def _layer_norm(layer: Any) -> LayerNormParams | None:
    if layer is None or not getattr(layer, "built", False):
        return None
    return LayerNormParams(
        gamma=np.asarray(layer.gamma.numpy()),
        beta=np.asarray(layer.beta.numpy()),
        eps=float(layer.epsilon),
    )

"""How TF ports name their layers in a graph: the name scopes that survive export.

A SavedModel or LiteRT flatbuffer keeps the TF op names of the model it came from
(``tf_bert_model/bert/encoder/layer_._1/intermediate/dense/...``), so its intermediate
tensors can be put back onto layers by name. Hugging Face TF ports call block ``i``
``layer_._{i}`` (BERT family), ``h_._{i}`` (GPT-2) or ``layers_._{i}``; keras-hub calls it
``transformer_layer_{i}``. Inside a BERT-family block the sub-layers are scopes named
as the cross-check's taps are (``attention``, ``intermediate``, ``output``).
"""

from __future__ import annotations

import re

_LAYER = re.compile(r"(?:^|/)(?:layer|layers|h|block|transformer_layer)_(?:\._)?(\d+)/")
_COMPONENT = re.compile(r"(?:^|/)(?:layer|layers)_\._\d+/(attention|intermediate|output)/")
_EMBEDDING = re.compile(r"(?:^|/)(?:embeddings|token_embedding|embeddings_layer_norm|wte)/")


def layer_of(scope: str) -> int | None:
    """The block a tensor's name scope lies in, or None outside the blocks."""
    m = _LAYER.search(scope)
    return int(m.group(1)) if m else None


def component_of(scope: str) -> str | None:
    """The sub-layer (tap component) a tensor lies in, where the port names them."""
    m = _COMPONENT.search(scope)
    return m.group(1) if m else None


def is_embedding_scope(scope: str) -> bool:
    return _EMBEDDING.search(scope) is not None

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
from dataclasses import dataclass


@dataclass(frozen=True)
class ScopeNames:
    """How one framework's graphs name the blocks: ``layer`` captures a block's index,
    ``component`` a sub-layer's name (a tap component), ``embedding`` matches the
    embedding layers (:mod:`.torch_scopes` has PyTorch's)."""

    layer: re.Pattern[str]
    component: re.Pattern[str]
    embedding: re.Pattern[str]

    def layer_of(self, scope: str) -> int | None:
        """The block a tensor's name scope lies in, or None outside the blocks."""
        m = self.layer.search(scope)
        return int(m.group(1)) if m else None

    def component_of(self, scope: str) -> str | None:
        """The sub-layer (tap component) a tensor lies in, where the model names them."""
        m = self.component.search(scope)
        return m.group(1) if m else None

    def is_embedding_scope(self, scope: str) -> bool:
        return self.embedding.search(scope) is not None


TF = ScopeNames(
    layer=re.compile(r"(?:^|/)(?:layer|layers|h|block|transformer_layer)_(?:\._)?(\d+)/"),
    component=re.compile(r"(?:^|/)(?:layer|layers)_\._\d+/(attention|intermediate|output)/"),
    embedding=re.compile(r"(?:^|/)(?:embeddings|token_embedding|embeddings_layer_norm|wte)/"),
)
layer_of, component_of, is_embedding_scope = TF.layer_of, TF.component_of, TF.is_embedding_scope

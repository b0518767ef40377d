"""LayoutLM: BERT with 2-D position embeddings of token boxes (``bbox``, all zeros when
not given, on both paths)."""

from __future__ import annotations

from .base import Architecture, Positions, hf_classes
from .bert import FFN_WEIGHT, HINT_FIELDS, TINY

ARCHITECTURES = (
    Architecture(
        model_type="layoutlm",
        family="layoutlm",
        **hf_classes("LayoutLM"),
        tiny={**TINY, "max_2d_position_embeddings": 128},
        positions=Positions.ABSOLUTE,
        hint_fields=(*HINT_FIELDS, "max_2d_position_embeddings"),
        ffn_weight=FFN_WEIGHT,
    ),
)

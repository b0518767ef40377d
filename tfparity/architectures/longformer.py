"""Longformer: RoBERTa's embeddings (padding-aware positions) with sliding-window
attention (``attention_window`` per layer; sequences are padded to a multiple of it
inside the model)."""

from __future__ import annotations

from .base import Architecture, LocalWindow, Positions, hf_classes
from .bert import FFN_WEIGHT, HINT_FIELDS
from .roberta import TINY_ROBERTA

ARCHITECTURES = (
    Architecture(
        model_type="longformer",
        family="longformer",
        **hf_classes("Longformer"),
        tiny={**TINY_ROBERTA, "attention_window": 4},
        positions=Positions.PADDING_AWARE,
        local_window=LocalWindow("sliding-window attention", "attention_window"),
        hint_fields=(*HINT_FIELDS, "attention_window"),
        ffn_weight=FFN_WEIGHT,
    ),
)

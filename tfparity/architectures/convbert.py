"""ConvBERT: BERT with span-based dynamic convolution heads beside self-attention
(``head_ratio``), behind an embedding projection. Localised to the layer."""

from __future__ import annotations

from .base import Architecture, LocalWindow, Positions, hf_classes
from .bert import FFN_WEIGHT, HINT_FIELDS, TINY

ARCHITECTURES = (
    Architecture(
        model_type="convbert",
        family="convbert",
        **hf_classes("ConvBert"),
        tiny={**TINY, "embedding_size": 16},
        positions=Positions.ABSOLUTE,
        local_window=LocalWindow("span-based dynamic convolution", "conv_kernel_size"),
        hint_fields=(*HINT_FIELDS, "head_ratio", "conv_kernel_size", "num_groups"),
        ffn_weight=FFN_WEIGHT,
    ),
)

"""ConvBERT: BERT with span-based dynamic convolution heads beside self-attention
(``head_ratio``), behind an embedding projection. Localised to the layer."""

from __future__ import annotations

from .base import Architecture, Positions
from .bert import FFN_WEIGHT, HINT_FIELDS, TINY

ARCHITECTURES = (
    Architecture(
        model_type="convbert",
        family="convbert",
        tf_class="TFConvBertModel",
        pt_class="ConvBertModel",
        tf_head_class="TFConvBertForMaskedLM",
        pt_head_class="ConvBertForMaskedLM",
        tiny={**TINY, "embedding_size": 16},
        positions=Positions.ABSOLUTE,
        hint_fields=(*HINT_FIELDS, "head_ratio", "conv_kernel_size", "num_groups"),
        ffn_weight=FFN_WEIGHT,
    ),
)
